"""`kvcalc verify --tp N`: one process per tensor-parallel rank, launched with torch.multiprocessing (spawn),
joined in a torch.distributed group (gloo on CPU, NCCL on CUDA). Each rank builds its own shard's plan (vLLM
replicates latent caches on every rank and splits KV heads), allocates and fills it on its device, and the
results are gathered on rank 0, which writes them for the launcher."""

from __future__ import annotations

import json
import os
import socket
import tempfile

from ..errors import KvcalcError


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, world: int, port: int, out_path: str, kwargs: dict, run_one) -> None:
    import torch
    import torch.distributed as dist

    device = kwargs["device"]
    backend = "nccl" if device == "cuda" else "gloo"
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        try:
            result = run_one(rank=rank, **kwargs).to_json()
        except KvcalcError as exc:
            result = {"error": str(exc), "param": exc.param}
        except Exception as exc:  # reported by the launcher as one line
            result = {"error": f"rank {rank}: {type(exc).__name__}: {exc}"}
        gathered = [None] * world if rank == 0 else None
        dist.gather_object(result, gathered, dst=0)
        if rank == 0:
            with open(out_path, "w") as f:
                json.dump(gathered, f)
    finally:
        dist.destroy_process_group()


def run_ranks(world: int, kwargs: dict, run_one) -> list[dict]:
    """Run ``run_one`` (kvcalc.verify.run_one, passed in: this module never imports its package) on ``world``
    ranks and gather their reports."""
    import torch
    import torch.multiprocessing as mp

    if kwargs["device"] == "cuda" and torch.cuda.device_count() < world:
        raise KvcalcError(f"tp: {world} ranks need {world} CUDA devices, this machine has "
                          f"{torch.cuda.device_count()}", param="tp")
    with tempfile.TemporaryDirectory(prefix="kvcalc-verify-") as d:
        out_path = os.path.join(d, "ranks.json")
        mp.start_processes(_rank_main, args=(world, _free_port(), out_path, kwargs, run_one), nprocs=world, join=True,
                           start_method="spawn")
        with open(out_path) as f:
            results = json.load(f)
    for r in results:
        if "error" in r:
            raise KvcalcError(r["error"], param=r.get("param"))
    return results
