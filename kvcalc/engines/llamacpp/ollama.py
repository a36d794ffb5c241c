"""What ollama works out before it launches llama-server (ollama v0.33.0-rc2, commit fb30760, which runs every GGUF
through llama-server), beside what llama.cpp then allocates:

* ``llm/llama_server.go`` ``PredictServerVRAM``: the model file's size plus a KV term of
  ``2 x block_count x kv_heads x head_dim x n_ctx x 2`` bytes, with ``kv_heads`` the smallest
  ``attention.head_count_kv`` (1 where 0), ``head_dim = embedding_length / the largest attention.head_count`` (not
  ``attention.key_length``), ``n_ctx = min(num_ctx, context_length) x parallel`` (``server/sched.go``
  ``effectiveLlamaServerContext``): always f16, every block a full-context attention layer, no compute buffers.
* ``server/sched.go`` ``automaticGenerationBatch``: the ``-b`` / ``-ub`` it passes when ``num_batch`` is not set:
  2,048 past 32,768 tokens of context, 1,024 past 4,096, else 512, lowered while the prediction does not fit the
  available memory (``generationBatchFits``: within 80 % of it, 60 % for 2,048 and 75 % for 1,024, with 2 GiB /
  768 MiB of room left); 512 (256 past 4,096 tokens on a CUDA GPU of 8 GiB or less) with flash attention off on CUDA.
* ``server/sched.go`` ``load``: ``OLLAMA_NUM_PARALLEL`` forced to 1 for the architectures listed there;
  ``bestSingleGPUFit``: with several GPUs, the one whose available memory's 80 % holds the prediction. With one GPU
  ollama launches llama-server whatever the prediction says, and llama-server's own fit places the layers.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...units import GIB, MIB, format_bytes

VERSION = "v0.33.0-rc2 (fb30760)"
#: server/sched.go load: "model architecture does not currently support parallel requests"
SINGLE_PARALLEL = frozenset({"mllama", "qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe", "qwen3next", "lfm2", "lfm2moe",
                             "nemotron_h", "nemotron_h_moe", "nemotron_h_omni"})
BATCH_DEFAULT, BATCH_CONSTRAINED, BATCH_MEDIUM, BATCH_LARGE = 512, 256, 1024, 2048
SURCHARGE = {BATCH_LARGE: 2 * GIB, BATCH_MEDIUM: 768 * MIB}
HEADROOM_PCT = {BATCH_LARGE: 60, BATCH_MEDIUM: 75}


@dataclass(frozen=True)
class Prediction:
    """PredictServerVRAM's figures for one launch."""

    n_ctx: int  # min(num_ctx, context_length) x parallel
    layers: int
    kv_heads: int
    head_dim: int
    file_bytes: int
    kv_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.file_bytes + self.kv_bytes


def predict(hp, n_ctx: int) -> Prediction:
    """llm/llama_server.go PredictServerVRAM for the GGUF whose hparams are ``hp`` (config.gguf.hparams)."""
    layers, embd, heads, kv_heads = hp.ollama_meta
    kv_heads = kv_heads or 1
    head_dim = embd // heads if heads > 0 else 0
    return Prediction(n_ctx, layers, kv_heads, head_dim, hp.file_size, 2 * layers * kv_heads * head_dim * n_ctx * 2)


def _fits(batch: int, predicted: int, available: int) -> bool:
    """server/sched.go generationBatchFits (and generationBatchHasHeadroom, generationBatchSurcharge)."""
    if predicted == 0 or available == 0:
        return True
    threshold = available * 80 // 100
    if predicted > threshold:
        return False
    if batch in HEADROOM_PCT and predicted > available * HEADROOM_PCT[batch] // 100:
        return False
    return SURCHARGE.get(batch, 0) <= threshold - predicted


def automatic_batch(n_ctx: int, predicted: int, available: int, flash_attn: str, cuda: bool) -> tuple[int, str]:
    """server/sched.go automaticGenerationBatch: num_batch (-b and -ub) where the user set none, and why."""
    if flash_attn == "disabled" and cuda:
        if n_ctx > 4096 and 0 < available <= 8 * GIB:
            return BATCH_CONSTRAINED, "256: flash attention off on a CUDA GPU of 8 GiB or less, past 4,096 tokens"
        return BATCH_DEFAULT, "512: flash attention off on CUDA"
    batch = BATCH_LARGE if n_ctx > 32768 else BATCH_MEDIUM if n_ctx > 4096 else BATCH_DEFAULT
    first = batch
    while batch > BATCH_DEFAULT and not _fits(batch, predicted, available):
        batch = BATCH_MEDIUM if batch > BATCH_MEDIUM else BATCH_DEFAULT
    why = f"{batch:,} for {n_ctx:,} tokens of context"
    if batch != first:
        why += f" ({first:,} did not fit the prediction's headroom)"
    return batch, why


def differences(pred: Prediction, allocation, weights_gpu: int | None) -> str:
    """Why ollama's prediction and llama.cpp's allocation differ, term by term, in one line."""
    a = allocation
    cp = a.cparams
    caches = a.memory_bytes
    parts = [f"ollama predicts {format_bytes(pred.total_bytes)} ({pred.total_bytes:,} B): the file's "
             f"{pred.file_bytes:,} B plus a KV term of {pred.kv_bytes:,} B (2 x {pred.layers} blocks x {pred.kv_heads} "
             f"KV heads x {pred.head_dim} x {pred.n_ctx:,} tokens x 2 B, f16)"]
    why = []
    if cp.type_k.name != "f16" or cp.type_v.name != "f16":
        why.append(f"the cache is {cp.type_k.name}/{cp.type_v.name}, the prediction counts f16")
    kinds = {c.kind for c in a.caches}
    if "swa" in kinds:
        swa = next(c for c in a.caches if c.kind == "swa")
        why.append(f"{swa.logged_layers} sliding-window layers keep {swa.cells:,} cells, not {cp.n_ctx_seq:,}")
    if "recurrent" in kinds:
        why.append("recurrent layers keep a fixed state, not a cell a token")
    if a.model.mla:
        why.append("MLA stores one latent row a token, no V")
    n_kv = sum(c.logged_layers for c in a.caches if c.kind != "recurrent")
    if n_kv != pred.layers and "recurrent" not in kinds:
        why.append(f"{n_kv} layers hold KV, the prediction counts {pred.layers} blocks")
    widths = {lay.k_width for lay in a.model.layers if lay.kv}
    if widths and widths != {pred.kv_heads * pred.head_dim}:
        why.append(f"K rows of {'/'.join(str(w) for w in sorted(widths))} values (attention.key_length), the "
                   f"prediction's {pred.kv_heads} x {pred.head_dim}")
    parts.append(f"llama.cpp allocates {caches:,} B of caches ({caches - pred.kv_bytes:+,} B against the KV term"
                 + (f": {'; '.join(why)}" if why else "") + ")")
    if weights_gpu is not None:
        parts.append(f"{weights_gpu:,} B of weights on the GPU against the file's {pred.file_bytes:,} B")
    parts.append("and compute buffers that neither counts (the graph's scratch, sized by -ub and the model)")
    return "; ".join(parts)
