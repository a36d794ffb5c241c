"""LMCache 0.5.6's arithmetic for the tiers it keeps a serving engine's KV cache in below the GPU: its CPU pool and
its local disk (paths under ``lmcache/`` of the 0.5.6 wheel, the newest 0.5.x on PyPI).

LMCache stores a request's tokens in chunks of ``chunk_size`` tokens (v1/config.py ``chunk_size``, 256; the MP
server's ``--chunk-size``, 256: v1/multiprocess/config.py). One chunk object holds one rank's slice of the chunk, all
the rank's layers: ``kv_size x layers x chunk_size x heads x head_size x dtype`` bytes, ``kv_size`` 2 (K and V), 1 for
MLA (v1/storage_backend/local_cpu_backend.py ``get_full_chunk_size_bytes``: "already accounted for parallelism";
integration/vllm/vllm_service_factory.py ``kv_shape``; the MP server's ``MemoryLayoutDesc``,
v1/multiprocess/transfer_context/worker_transfer.py). An object takes its size rounded up to 4 KiB in the pool
(memory_management.py ``AddressManager.ALIGN_BYTES = 4096``, ``TensorMemoryAllocator.allocate``; the MP server's
``--l1-align-bytes``, 4096), so whole chunks fit ``pool // round_up(chunk, 4096)`` (``LocalCPUBackend.
calculate_chunk_budget``: "MixedMemoryAllocator uses TensorMemoryAllocator with 4KB alignment").

"GB" in LMCache's settings is GiB: ``int(max_local_cpu_size * 1024**3)`` (``LocalCPUBackend.initialize_allocator``),
``int(max_local_disk_size * 1024**3)`` (local_disk_backend.py), ``int(l1_size_gb * (1 << 30))`` (v1/distributed/
config.py ``parse_args_to_config``).

A request's last, unfull chunk is not stored unless ``save_unfull_chunk`` is on (v1/token_database.py
``ChunkedTokenDatabase._chunk_tokens``: ``len(tokens) - len(tokens) % chunk_size``); the MP connector stores whole
chunks only (integration/vllm/lmcache_mp_metadata.py: "Defaults to storing only complete chunks").

Torch-free: the figures are whole-number arithmetic on the engine's plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..units import GIB

VERSION = "0.5.6"
#: v1/config.py _CONFIG_DEFINITIONS: chunk_size 256, max_local_cpu_size 5.0 (GiB), max_local_disk_size 0.0 (GiB),
#: save_unfull_chunk False; the MP server's --chunk-size 256 (v1/multiprocess/config.py)
DEFAULT_CHUNK_SIZE = 256
DEFAULT_MAX_LOCAL_CPU_SIZE = 5.0
DEFAULT_MAX_LOCAL_DISK_SIZE = 0.0
#: memory_management.py AddressManager.ALIGN_BYTES; the MP server's --l1-align-bytes default
ALIGN_BYTES = 4096
#: v1/distributed/config.py EvictionConfig: the MP server's L1 starts evicting at 80 % of its size, 20 % at a time
#: v1/memory_allocators/lazy_memory_allocator.py LazyMemoryAllocator.PIN_CHUNK_SIZE: the MP server's L1 is pinned in
#: steps of 64 MiB, its final size rounded up to them
LAZY_PIN_CHUNK = 1 << 26
EVICTION_TRIGGER_WATERMARK = 0.8
EVICTION_RATIO = 0.2


def gib_bytes(gib: float) -> int:
    """LMCache's GB setting in bytes: ``int(x * 1024**3)``."""
    return int(gib * GIB)


def aligned(n: int, align: int = ALIGN_BYTES) -> int:
    """``n`` rounded up to ``align`` (an object's bytes in the allocator)."""
    return -(-n // align) * align


@dataclass(frozen=True)
class ChunkPool:
    """A pool of ``pool_bytes`` holding chunk objects of ``object_bytes`` (one rank's slice of ``chunk_size`` tokens);
    ``ranks`` objects make one chunk of the replica (the ranks sharing the pool: 1 for a pool of one worker)."""

    pool_bytes: int
    chunk_size: int
    per_token: int  # bytes of one token on one rank, every layer of its stage (kv_size included)
    ranks: int = 1

    @property
    def object_bytes(self) -> int:
        return self.per_token * self.chunk_size

    @property
    def object_slot(self) -> int:
        """Bytes an object takes in the pool (4 KiB-aligned)."""
        return aligned(self.object_bytes)

    @property
    def objects(self) -> int:
        return self.pool_bytes // self.object_slot if self.object_bytes else 0

    @property
    def chunks(self) -> int:
        """Whole chunks of the replica: every rank sharing the pool stores an object of each."""
        return self.objects // self.ranks

    @property
    def tokens(self) -> int:
        return self.chunks * self.chunk_size

    def requests(self, context: int, save_unfull: bool = False) -> int:
        """Requests whose ``context``-token prefix the pool holds at once: their whole chunks (and with
        ``save_unfull`` the last, partial chunk, stored at its own 4 KiB-aligned size)."""
        full, rest = divmod(context, self.chunk_size)
        need = full * self.object_slot
        if save_unfull and rest:
            need += aligned(rest * self.per_token)
        need *= self.ranks
        return self.pool_bytes // need if need else 0
