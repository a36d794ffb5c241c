"""What vLLM 0.33's NixlConnector moves from the prefiller to the decoder for one request (`kvcalc transfer`)."""

from __future__ import annotations

from ...pool import GroupKind
from ...handoff import TransferPlan, by_kind, cdiv


def nixl_transfer(p, spec, tokens: int):
    """vLLM 0.33's NixlConnector (the decoder reads from the prefiller), one rank, no decode-side prefix hit:

    * tokens: all the prompt's; with a Mamba / linear-attention state group the prefiller stops one short and
      the decoder computes the last itself (``nixl/base_scheduler.py::_prefill_backoff``);
    * a full-attention group (MLA, V4's compressed entries and indexer included): the request's
      ``cdiv(T, block)`` blocks, the part-filled last one whole (``kv_cache_manager.py::
      get_block_ids_for_computed_tokens``);
    * a sliding-window group: the blocks the decoder allocates, those before the window being null:
      ``cdiv(T, block) - (max(0, T - W + 1) // block)`` (``SlidingWindowManager.get_num_skipped_tokens``,
      ``add_local_computed_blocks``, ``allocate_external_computed_blocks``);
    * a chunked local attention group (Llama 4): likewise, the blocks of the current chunk only:
      ``cdiv(T, block) - (T // C x C) // block`` (``ChunkedLocalAttentionManager.get_num_skipped_tokens``: the
      tokens before the chunk holding the next token, all of them when T is a multiple of C);
    * one descriptor per (layer, block) of the layer's whole page, K and V together, alignment padding included
      (``nixl/base_worker.py``); a state group: the running state's block, at the state's real bytes (conv + SSM
      state, ``ssm_conv_transfer_utils.py``), not the padded page;
    * no metadata beside the cache: the decoder recomputes the last prompt token to sample the first;
    * a Mamba / linear-attention hybrid starts only with VLLM_SSM_CONV_STATE_LAYOUT=DS (``nixl/base_worker.py``
      asserts ``is_conv_state_dim_first()``; the default layout is "SD", ``model_executor/layers/mamba/
      mamba_utils.py::get_conv_state_layout``). Every state kind kvcalc plans for vLLM is one the connector
      splits (``ssm_conv_transfer_utils.py::derive_mamba_conv_split``: Mamba-1, Mamba-2 and GDN, Kimi's KDA
      layer being a GDN one); MiniMax's linear attention, which it refuses, vLLM 0.33 no longer runs."""

    has_state = any(g.kind is GroupKind.STATE for g in p.groups)
    moved = tokens - 1 if has_state and tokens > 1 else tokens

    def local(skipped_tokens, where: str):
        """A local group's (blocks, rule): the blocks of its tokens less the null ones the skipped tokens fill
        (get_num_skipped_tokens at ``moved``; ``n``: the window or the chunk)."""
        def units(bs: int, n: int):
            skipped = skipped_tokens(n) // bs
            return cdiv(moved, bs) - skipped, f"cdiv({moved:,}, {bs}) - {skipped:,} before the {where}"
        return units

    out = by_kind(p, "block", lambda bs: (cdiv(moved, bs), f"cdiv({moved:,}, {bs})"),
                  local(lambda w: max(0, moved - w + 1), "window"), "the running state, its real bytes",
                  local(lambda c: moved // c * c, "chunk"))
    notes = ["NixlConnector: the decoder reads each rank's blocks from the prefiller"]
    if moved != tokens:
        notes.append(f"with state layers the prefiller computes {moved:,} of the {tokens:,} prompt tokens; the "
                     "decoder computes the last itself")
    if has_state:
        notes.append("vLLM's NixlConnector refuses to start a Mamba hybrid unless VLLM_SSM_CONV_STATE_LAYOUT=DS "
                     "is set (the conv state stored dim-first; the default layout is SD)")
    chunks = sorted({g.window for g in p.groups if g.kind is GroupKind.CHUNK and moved % g.window == 0})
    if chunks:
        notes.append(f"{moved:,} tokens end a chunk of {', '.join(f'{c:,}' for c in chunks)}: vLLM 0.33 moves no "
                     "block of those chunked groups (every token is before the next chunk), yet the decoder "
                     "recomputes the last prompt token (scheduler.py _update_waiting_for_remote_kv), whose chunk's "
                     "blocks it then holds as null: kvcalc counts what the code moves; not checked on a GPU")
    return TransferPlan(out, moved, 0, tuple(notes))
