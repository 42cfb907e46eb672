"""The checks of ``rollcli doctor``: each looks at one thing a first GPU run on a cluster needs
and returns :class:`Check` lines (``ok``, ``warn``, ``fail`` or ``skip``, what was found, the
fix). They read the machine only through :mod:`rollcli.doctor.probes` (replaced in tests) and
the spec only through :class:`Context`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rollcli.doctor import probes

__all__ = ["ALL_CHECKS", "Check", "Context"]

Status = Literal["ok", "warn", "fail", "skip"]
INSTALL_HINT = "install the pinned GPU stack (docs/verl.md, Running on your cluster)"


def _install_commands() -> list[str] | None:
    """The verl backend's own GPU install commands, where this rollcli has them."""
    try:
        from rollcli.backends.verl.gpu_stack import install_commands
    except ImportError:
        return None
    return list(install_commands())


def _install_hint() -> str:
    commands = _install_commands()
    return " && ".join(commands) if commands else INSTALL_HINT


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    name: str
    status: Status
    detail: str
    fix: str = ""


@dataclass
class Context:
    """What the checks know: the spec (or None: the GPU stack only), the runs folder, the
    environment, and whether this is a Slurm job's node."""

    spec: Any | None = None
    spec_file: str | None = None
    runs_dir: Path = Path("runs")
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    @property
    def backend(self) -> dict[str, Any]:
        return self.spec.backend_dict() if self.spec is not None else {}

    @property
    def wants_cuda(self) -> bool:
        """A verl spec on cuda, or no spec (the GPU stack itself is checked)."""
        backend = self.backend
        return self.spec is None or (
            backend.get("kind") == "verl" and backend.get("device", "cuda") == "cuda"
        )

    @property
    def on_slurm(self) -> bool:
        return self.spec is not None and self.spec.launch.executor == "slurm"

    @property
    def in_job(self) -> bool:
        return bool(self.env.get("SLURM_JOB_ID"))


def check_gpu_stack(ctx: Context) -> list[Check]:
    """Installed versions against the pins of rollcli's ``verl`` and ``gpu`` extras."""
    if not ctx.wants_cuda:
        return [Check("gpu stack", "skip", "the spec does not run on cuda")]
    out, unpinned = [], []
    for req in probes.gpu_pins():
        version = probes.installed_version(req.name)
        wanted = str(req.specifier) or "any version"
        if version is not None and not req.specifier:
            unpinned.append(f"{req.name} {version}")
        elif version is None:
            out.append(Check(req.name, "fail", f"not installed (pinned {wanted})", _install_hint()))
        elif req.specifier and not req.specifier.contains(version, prereleases=True):
            out.append(
                Check(req.name, "fail", f"{version} installed, pinned {wanted}", _install_hint())
            )
        else:
            out.append(Check(req.name, "ok", f"{version} ({wanted})"))
    if unpinned:
        out.append(Check("unpinned", "ok", ", ".join(unpinned)))
    return out


def _attention_fallback(backend: Mapping[str, Any]) -> str | None:
    """A non-flash attention implementation the spec chose, whatever the knob's name."""
    overrides = backend.get("verl_overrides") or {}
    for key, value in [*backend.items(), *overrides.items()]:
        if ("attn" in key or "attention" in key) and str(value) in ("sdpa", "eager"):
            return f"{key}: {value}"
    return None


def check_flash_attn(ctx: Context) -> list[Check]:
    """verl's FSDP workers load models with flash_attention_2 unless told otherwise."""
    if not ctx.wants_cuda:
        return [Check("flash-attn", "skip", "the spec does not run on cuda")]
    fallback = _attention_fallback(ctx.backend)
    if fallback:
        return [Check("flash-attn", "skip", f"not used ({fallback})")]
    problem = probes.import_problem("flash_attn")
    if problem is None:
        return [Check("flash-attn", "ok", f"imports ({probes.installed_version('flash-attn')})")]
    commands = _install_commands()
    if commands and len(commands) > 1:
        install = commands[1]
    else:
        pin = next((r for r in probes.gpu_pins() if r.name == "flash-attn"), None)
        wanted = str(pin.specifier) if pin is not None else ""
        install = f"pip install 'flash-attn{wanted}' --no-build-isolation"
    return [
        Check(
            "flash-attn",
            "fail",
            f"does not import: {problem}",
            f"{install} (built against the installed torch), or use sdpa attention",
        )
    ]


def _cuda_version(text: str) -> tuple[int, ...] | None:
    match = re.search(r"CUDA Version:\s*([\d.]+)", text)
    return tuple(int(x) for x in match.group(1).split(".")) if match else None


def check_cuda(ctx: Context) -> list[Check]:
    """A GPU visible to torch, and a driver new enough for torch's CUDA build."""
    if not ctx.wants_cuda:
        return [Check("cuda", "skip", "the spec does not run on cuda")]
    info = probes.torch_cuda()
    if "error" in info:
        return [Check("cuda", "fail", f"torch does not import: {info['error']}", _install_hint())]
    if info["cuda"] is None:
        return [Check("cuda", "fail", f"torch {info['torch']} is a CPU build", _install_hint())]
    smi = probes.command_output(["nvidia-smi"])
    if not info["available"]:
        status: Status = "fail" if ctx.in_job else "warn"
        where = "this Slurm job" if ctx.in_job else "this node (a login node?)"
        fix = (
            "request GPUs (launch.gpus_per_node) and check CUDA_VISIBLE_DEVICES"
            if ctx.in_job
            else "run the doctor on a GPU node: srun --gpus-per-node=1 rollcli doctor SPEC"
        )
        seen = "nvidia-smi answers" if smi else "no nvidia-smi"
        return [Check("cuda", status, f"torch sees no GPU on {where} ({seen})", fix)]
    out = [
        Check(
            "cuda",
            "ok",
            f"{info['devices']} x {info['name']}, torch {info['torch']} built for CUDA "
            f"{info['cuda']}",
        )
    ]
    driver = _cuda_version(smi or "")
    built = tuple(int(x) for x in str(info["cuda"]).split(".")[:2])
    if driver is None:
        out.append(Check("driver", "warn", "nvidia-smi gives no CUDA version"))
    elif driver[:2] < built:
        out.append(
            Check(
                "driver",
                "fail",
                f"the driver supports CUDA {'.'.join(map(str, driver))}, torch needs {info['cuda']}",
                "use a torch wheel for the driver's CUDA, or ask for a newer driver",
            )
        )
    else:
        out.append(Check("driver", "ok", f"supports CUDA {'.'.join(map(str, driver))}"))
    return out


def check_nccl(ctx: Context) -> list[Check]:
    """NCCL settings that break or slow multi-GPU runs."""
    if not ctx.wants_cuda:
        return [Check("nccl", "skip", "the spec does not run on cuda")]
    settings = {k: v for k, v in ctx.env.items() if k.startswith("NCCL_")}
    out = []
    ifname = settings.get("NCCL_SOCKET_IFNAME")
    if ifname:
        names = probes.network_interfaces()
        wanted = [p.lstrip("=^") for p in ifname.split(",") if p]
        exclude = ifname.startswith("^")
        exact = ifname.startswith("=")
        hits = [n for n in names for w in wanted if (n == w if exact else n.startswith(w))]
        if not exclude and not hits:
            out.append(
                Check(
                    "nccl",
                    "fail",
                    f"NCCL_SOCKET_IFNAME={ifname} matches no interface here ({', '.join(names)})",
                    "set it to the node's fast interface (ip -br link), or unset it",
                )
            )
    for name in ("NCCL_P2P_DISABLE", "NCCL_IB_DISABLE"):
        if settings.get(name) == "1":
            out.append(
                Check("nccl", "warn", f"{name}=1: slower GPU-GPU transport", f"unset {name}")
            )
    if not out:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "no NCCL_* set"
        out.append(Check("nccl", "ok", shown))
    return out


def check_ray_address(ctx: Context, path: Path | None = None) -> list[Check]:
    """Ray's address file: a stale one makes a plain ``ray.init()`` wait for ever."""
    path = probes.RAY_ADDRESS_FILE if path is None else path
    try:
        address = path.read_text().strip()
    except OSError:
        return [Check("ray", "ok", f"no {path}: no Ray cluster to join by accident")]
    host, _, port = address.rpartition(":")
    if host and port.isdigit() and probes.port_open(host, int(port)):
        return [Check("ray", "warn", f"a Ray cluster is running here ({address}, {path})")]
    return [
        Check(
            "ray",
            "fail",
            f"{path} names {address or 'nothing'}, which does not answer (a stopped cluster)",
            f"rm {path}",
        )
    ]


def check_sandbox(ctx: Context) -> list[Check]:
    """bubblewrap, user namespaces, an empty sandbox, a delegated cgroup (code grading)."""
    from rollcli.eval.graders.sandbox.preflight import needs_sandbox, sandbox_checks

    if ctx.spec is None:
        return [Check("sandbox", "skip", "no spec: checked for specs that grade code")]
    spec = ctx.spec.to_dict()
    need = needs_sandbox({"backend": spec["backend"], "eval": spec.get("eval") or {}})
    if need is None:
        return [Check("sandbox", "skip", "the spec grades no code")]
    return [
        Check(f"sandbox: {c.name}", "ok" if c.ok else "fail", c.detail, c.fix)
        for c in sandbox_checks()
    ]


def check_run_folder(ctx: Context) -> list[Check]:
    """Slurm: the run folder on a file system every node sees."""
    from rollcli.launch.shared_fs import SHARED_TYPES, filesystem_of, node_local_reason

    if not ctx.on_slurm:
        return [Check("run folder", "skip", "not a Slurm spec")]
    runs = Path(ctx.runs_dir).resolve()
    reason = node_local_reason(runs)
    if reason:
        return [
            Check("run folder", "fail", f"{runs}: {reason}", "pass --runs-dir on shared storage")
        ]
    point, kind = filesystem_of(runs)
    if kind in SHARED_TYPES:
        return [Check("run folder", "ok", f"{runs} on {kind} ({point})")]
    return [
        Check(
            "run folder",
            "warn",
            f"{runs} on {kind} ({point}): not a known network file system",
            "make sure every node sees this folder",
        )
    ]


def check_hf_cache(ctx: Context) -> list[Check]:
    """The spec's hub models in the (shared) Hugging Face cache; offline mode."""
    from rollcli.hf_cache import hub_cache_dir, hub_models, missing_models, offline_wanted
    from rollcli.launch.shared_fs import node_local_reason

    repos = hub_models(ctx.backend)
    if not repos:
        return [Check("hf cache", "skip", "no hub model in the spec")]
    cache = hub_cache_dir(ctx.env)
    offline = offline_wanted(ctx.env) and ctx.on_slurm
    out = []
    local = node_local_reason(cache)
    if local and ctx.on_slurm:
        out.append(Check("hf cache", "fail", f"{cache}: {local}", "export HF_HOME=<shared folder>"))
    missing = missing_models(repos, cache)
    spec = ctx.spec_file or "SPEC"
    if missing:
        status: Status = "fail" if offline else "warn"
        mode = "jobs run offline" if offline else "jobs will download it"
        out.append(
            Check(
                "hf cache",
                status,
                f"{', '.join(missing)} not in {cache} ({mode})",
                f"rollcli data prefetch {spec}",
            )
        )
    else:
        out.append(Check("hf cache", "ok", f"{', '.join(repos)} in {cache}"))
    return out


def _slurm_version(text: str) -> tuple[int, int] | None:
    match = re.search(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def check_slurm(ctx: Context) -> list[Check]:
    """Slurm's version, and srun's CPUs: since 22.05 srun does not inherit --cpus-per-task."""
    if not ctx.on_slurm:
        return [Check("slurm", "skip", "not a Slurm spec")]
    text = probes.command_output(["srun", "--version"]) or ""
    version = _slurm_version(text)
    if version is None:
        return [Check("slurm", "fail", "srun is not on PATH", "run on a Slurm login node")]
    out = [Check("slurm", "ok", text.strip())]
    if version < (22, 5):
        return out
    if ctx.in_job and ctx.env.get("SLURM_CPUS_PER_TASK"):
        cpus, srun_cpus = ctx.env["SLURM_CPUS_PER_TASK"], ctx.env.get("SRUN_CPUS_PER_TASK")
        if srun_cpus != cpus:
            out.append(
                Check(
                    "srun cpus",
                    "fail",
                    f"SLURM_CPUS_PER_TASK={cpus} but SRUN_CPUS_PER_TASK={srun_cpus}: srun's tasks "
                    "get fewer CPUs than Ray is told",
                    "export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK in the job",
                )
            )
        else:
            out.append(Check("srun cpus", "ok", f"SRUN_CPUS_PER_TASK={srun_cpus}"))
        return out
    from rollcli.launch.api import Resources
    from rollcli.launch.sbatch import render_setup

    setup = "\n".join(render_setup(Path(ctx.runs_dir), Resources()))
    if "SRUN_CPUS_PER_TASK" in setup:
        out.append(Check("srun cpus", "ok", "rollcli's sbatch scripts export SRUN_CPUS_PER_TASK"))
    else:
        out.append(
            Check(
                "srun cpus",
                "fail",
                "rollcli's sbatch scripts do not export SRUN_CPUS_PER_TASK: each srun task may "
                "get one CPU",
                "upgrade rollcli",
            )
        )
    return out


def check_wandb(ctx: Context) -> list[Check]:
    """Where ``tracking.wandb.mode: auto`` sends runs from this node."""
    if ctx.spec is None:
        return [Check("wandb", "skip", "no spec")]
    mode = ctx.spec.tracking.wandb.mode
    if mode != "auto":
        return [Check("wandb", "ok", f"mode {mode} (set in the spec)")]
    from rollcli.analysis.tracking import can_reach_wandb, is_logged_in

    offline = "or set tracking.wandb.mode: offline and wandb sync runs/<experiment>/jobs/*/wandb"
    if not is_logged_in():
        return [
            Check(
                "wandb", "warn", "auto -> nothing logged: no W&B login", f"wandb login, {offline}"
            )
        ]
    if not can_reach_wandb():
        return [
            Check(
                "wandb",
                "warn",
                "auto -> nothing logged: logged in but W&B is unreachable from here",
                offline,
            )
        ]
    return [Check("wandb", "ok", "auto -> online")]


ALL_CHECKS: tuple[Callable[[Context], list[Check]], ...] = (
    check_gpu_stack,
    check_flash_attn,
    check_cuda,
    check_nccl,
    check_ray_address,
    check_sandbox,
    check_run_folder,
    check_hf_cache,
    check_slurm,
    check_wandb,
)
