"""The ``hf`` rollout for verl on CPU: ``transformers.generate`` in a Ray actor.

* :class:`HFRolloutServer` — a Ray actor with verl's token-in/token-out server interface
  (``generate`` plus the sleep/wake/abort no-ops); concurrent requests with the same sampling
  parameters are batched into one left-padded ``generate`` call.
* ``HFReplica`` — verl's rollout replica for ``rollout.name: hf``: launches one server per replica.
* ``HFServerAdapter`` — verl's in-worker rollout object: after each actor update it receives the
  full weights and loads them into the replica's server.

The last two subclass verl classes, so they are built by :func:`register_hf_rollout` (called by
:mod:`rollcli.backends.verl.cpu_support` in every verl process of a ``device: cpu`` job).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

import torch

__all__ = ["HFRolloutServer", "HFReplica", "HFServerAdapter", "register_hf_rollout"]


# built by register_hf_rollout() (they subclass verl classes)
HFReplica: Any = None
HFServerAdapter: Any = None


def _server_name(replica_rank: int) -> str:
    return f"rollcli-hf-rollout-{replica_rank}"


class HFRolloutServer:
    """A token-in/token-out sampler over a transformers causal LM; requests are batched.

    verl's agent loop sends one request per rollout; concurrent requests with the same sampling
    parameters are gathered (for ``batch_wait_s``) and generated in one left-padded batch.
    """

    def __init__(self, model_path: str, response_length: int, max_batch: int = 64) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(max(1, int(os.environ.get("ROLLCLI_ROLLOUT_THREADS", "1"))))
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = AutoModelForCausalLM.from_pretrained(
            model_path, dtype=torch.float32, attn_implementation="eager"
        ).eval()
        self.response_length = int(response_length)
        self.max_batch = max_batch
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id
        self.eos_id = self.tokenizer.eos_token_id
        self.version = 0
        self._queue: list[tuple[list[int], dict[str, Any], asyncio.Future]] = []
        self._worker: asyncio.Task | None = None

    # -- weights ----------------------------------------------------------------------------
    def load_weights(self, state: dict[str, torch.Tensor], global_steps: int | None = None) -> int:
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        unexpected = [k for k in unexpected if "rotary" not in k]
        if unexpected:
            raise RuntimeError(f"rollout server got unknown weights: {unexpected[:5]}")
        self.version += 1
        return self.version

    # -- verl's server interface ------------------------------------------------------------
    async def generate(
        self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ):
        from verl.workers.rollout.replica import TokenOutput

        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        self._queue.append((list(prompt_ids), dict(sampling_params), future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        token_ids, log_probs = await future
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs if sampling_params.get("logprobs") else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.version},
        )

    async def _drain(self) -> None:
        while self._queue:
            await asyncio.sleep(0.02)  # let the agent loop submit the rest of its batch
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            key = _params_key(batch[0][1])
            same = [item for item in batch if _params_key(item[1]) == key]
            self._queue = [item for item in batch if _params_key(item[1]) != key] + self._queue
            try:
                results = await asyncio.to_thread(
                    self._generate_batch, [p for p, _, _ in same], same[0][1]
                )
            except Exception as error:  # surface the failure to every waiting request
                for _, _, future in same:
                    if not future.done():
                        future.set_exception(error)
                continue
            for (_, _, future), result in zip(same, results, strict=True):
                if not future.done():
                    future.set_result(result)

    @torch.no_grad()
    def _generate_batch(self, prompts: list[list[int]], params: dict[str, Any]):
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
            attention[row, width - len(prompt) :] = 1
        temperature = float(params.get("temperature", 1.0) or 0.0)
        kwargs: dict[str, Any] = {"do_sample": temperature > 0}
        if temperature > 0:
            kwargs["temperature"] = temperature
            kwargs["top_p"] = float(params.get("top_p", 1.0))
            top_k = int(params.get("top_k", -1) or -1)
            kwargs["top_k"] = top_k if top_k > 0 else 0
        out = self.model.generate(
            input_ids=input_ids,
            attention_mask=attention,
            max_new_tokens=self.response_length,
            eos_token_id=self.eos_id,
            pad_token_id=self.pad_id,
            output_scores=bool(params.get("logprobs")),
            return_dict_in_generate=True,
            **kwargs,
        )
        new = out.sequences[:, width:]
        logps = None
        if params.get("logprobs"):
            scores = torch.stack(out.scores, dim=1).log_softmax(-1)
            logps = scores.gather(-1, new.unsqueeze(-1)).squeeze(-1)
        results = []
        for row in range(len(prompts)):
            tokens = new[row].tolist()
            if self.eos_id in tokens:
                tokens = tokens[: tokens.index(self.eos_id) + 1]
            lp = logps[row, : len(tokens)].tolist() if logps is not None else None
            results.append((tokens, lp))
        return results

    async def wake_up(self) -> None:
        pass

    async def sleep(self) -> None:
        pass

    async def abort_all_requests(self, reject_request: bool = False) -> None:
        pass

    async def resume_generation(self) -> None:
        pass

    async def clear_kv_cache(self) -> None:
        pass

    async def release_kv_cache(self) -> None:
        pass

    async def resume_kv_cache(self) -> None:
        pass

    async def start_profile(self, **kwargs: Any) -> None:
        pass

    async def stop_profile(self) -> None:
        pass


def _params_key(params: dict[str, Any]) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in params.items()))


def register_hf_rollout() -> None:
    """Register the ``hf`` rollout in verl's replica and rollout registries (idempotent)."""
    import ray
    from verl.workers.rollout import base as rollout_base
    from verl.workers.rollout.base import BaseRollout
    from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry

    class HFReplica(RolloutReplica):
        """One transformers rollout server per replica, on the CPU of the driver's node."""

        async def launch_servers(self) -> None:
            name = _server_name(self.replica_rank)
            # a server left by an earlier job in this Ray cluster holds stale weights
            with contextlib.suppress(ValueError):
                ray.kill(ray.get_actor(name))
            actor_cls = ray.remote(num_cpus=0, max_concurrency=1000)(HFRolloutServer)
            server = actor_cls.options(name=name).remote(
                self.model_config.local_path
                if hasattr(self.model_config, "local_path")
                else self.model_config.path,
                self.config.response_length,
            )
            self.servers = [server]
            self._server_handle = server
            self._server_address = name

    class HFServerAdapter(BaseRollout):
        """In the actor worker: hands each update's full weights to the replica's server."""

        def __init__(self, config, model_config, device_mesh, *args: Any, **kwargs: Any) -> None:
            super().__init__(config, model_config, device_mesh)
            import torch.distributed as dist

            rank = dist.get_rank() if dist.is_initialized() else 0
            world = (
                self.config.tensor_model_parallel_size
                * self.config.data_parallel_size
                * self.config.pipeline_model_parallel_size
            )
            self.replica_rank = rank // world
            self.is_leader = rank % world == 0

        async def resume(self, tags: list[str]) -> None:
            pass

        async def release(self) -> None:
            pass

        async def update_weights(self, weights, wire_format: str = "named_tensors", **kwargs: Any):
            state = {name: tensor.detach().to("cpu", copy=True) for name, tensor in weights}
            if not self.is_leader:
                return
            server = ray.get_actor(_server_name(self.replica_rank))
            await server.load_weights.remote(state, kwargs.get("global_steps"))

    globals()["HFReplica"] = HFReplica
    globals()["HFServerAdapter"] = HFServerAdapter
    RolloutReplicaRegistry.register("hf", lambda: HFReplica)
    rollout_base._ROLLOUT_REGISTRY[("hf", "async")] = f"{__name__}.HFServerAdapter"
