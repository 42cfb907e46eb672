"""The tiny base models shipped with rollcli (safetensors) and their manifest (docs/tiny.md)."""
