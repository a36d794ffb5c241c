#!/usr/bin/env python
"""Ground truth for the size of a llama.cpp SEQUENCE STATE: the bytes llama_state_seq_get_size(ctx, seq) reports and
the file llama_state_seq_save_file writes (the file llama-server's POST /slots/{id}?action=save writes, and whose
size it returns as n_written), measured with llama.cpp itself (llama-cpp-python 0.3.36 = llama.cpp 0c1e57098, CPU
build) over the tiny synthetic GGUF models of scripts/audit/llamacpp_reference.py.

Not part of the suite. Run it with the scratch venv that llamacpp_reference.py describes (a from-source
llama-cpp-python 0.3.36 build plus numpy; nothing is installed into the project's environment):

    /work/scratch/venv-llama/bin/python scripts/audit/llamacpp_state_reference.py [--models a,b] [--quick]

It takes under a minute on 2 CPU cores (about 15 s) (one worker process per model, so an abort loses one case only).

The models: the full GGUF files llama.cpp loads are rebuilt from the committed metadata-only fixtures
tests/fixtures/gguf/llamacpp-<model>.gguf (header + key-values + tensor infos; the data section is all zeros) by
appending zero bytes up to models[m].gguf_file_size of tests/fixtures/engine-ref/llamacpp-0.3.36.json, and checked
against that fixture's gguf_sha256 (so they are byte for byte the files llamacpp_reference.py made). They are
written to --work (default /work/scratch/llamacpp-state-ref).

What is ours and what is llama.cpp's:
  * ours: the grid (models, cache types, flash attention, n_ctx, n_seq_max, kv_unified, swa_full, n_ubatch, how
    many tokens go into which sequence), the token ids (1 + i % 250, the vocab is 256), the batches, the
    llama-server token packing we pass for file_bytes_server (a copy of server_tokens::serialize for a text-only
    prompt: LLAMA_TOKEN_NULL, version 1, n, the n tokens, 0 media keys, i.e. n + 4 tokens), and the header
    parser below (a reading of llama_kv_cache::state_write / llama_memory_recurrent::state_write; for each model
    we state which sections its memory writes, `SECTIONS`; the parse must consume the blob exactly).
  * llama.cpp's: every number recorded as an output: llama_state_seq_get_size / _ext (flag 1 = PARTIAL_ONLY),
    the blob llama_state_seq_get_data returns (its header fields: n_stream, cell counts, per-cell n_seq_id,
    v_trans, n_layer, per-layer ggml type and row size / element size, recurrent r/s rows), the return value and
    the on-disk size of llama_state_seq_save_file, the file's own magic/version/token count, llama_n_ctx,
    llama_n_ctx_seq, llama_n_batch, llama_n_ubatch, llama_n_seq_max, llama_memory_seq_pos_min/max, and the
    refusal words when llama_init_from_model returns NULL.

Output: tests/fixtures/engine-ref/llamacpp-0.3.36-state.json (compact JSON, one case per line), per case: model,
gguf (file name), params (what we set), ctx (what llama.cpp resolved), seqs (per sequence: the tokens we decoded
into it, its pos_min/pos_max in llama.cpp's memory, seq_bytes, seq_bytes_partial, file_bytes,
file_bytes_server, file header, the parsed header `sections`).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
DEFAULT_OUT = REPO / "tests/fixtures/engine-ref/llamacpp-0.3.36-state.json"
REF_FIXTURE = REPO / "tests/fixtures/engine-ref/llamacpp-0.3.36.json"
GGUF_DIR = REPO / "tests/fixtures/gguf"
DEFAULT_WORK = Path("/work/scratch/llamacpp-state-ref")

TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "iq4_nl": 20, "bf16": 30}
TYPE_NAMES = {v: k for k, v in TYPES.items()}
FA = {"auto": -1, "disabled": 0, "enabled": 1}
IO_MAGIC = 0xAF143CD8           # llama-context.cpp: io_magic, written first by state_seq_get_size/get_data
LLAMA_STATE_SEQ_MAGIC = 0x67677371  # 'ggsq'
LLAMA_TOKEN_NULL = -1

# which memory sections a model's seq state holds, in write order (ours; used only to parse the blob):
# kv = llama_kv_cache, kv-noV = an MLA cache (K only), rs = llama_memory_recurrent
SECTIONS = {
    "llama-gqa": ["kv"], "qwen2-mqa": ["kv"], "qwen3-k64": ["kv"], "gemma3-noswa": ["kv"], "phi3-swa": ["kv"],
    "command-r-h48": ["kv"], "deepseek2-nomla": ["kv"],
    "deepseek2-mla": ["kv-noV"], "deepseek2-mla-nextn": ["kv-noV"],
    "gemma2-swa": ["kv", "kv"], "gemma3-swa": ["kv", "kv"], "gemma3-pattern": ["kv", "kv"], "gemma3n": ["kv", "kv"],
    "gpt-oss": ["kv", "kv"],
    "mamba": ["rs"], "mamba2": ["rs"],
    "granitehybrid": ["kv", "rs"], "jamba": ["kv", "rs"], "lfm2": ["kv", "rs"], "qwen3next": ["kv", "rs"],
    "qwen3next-nextn": ["kv", "rs"], "falcon-h1": ["kv", "rs"], "nemotron_h": ["kv", "rs"],
    "nemotron_h-mtp-ff0": ["kv", "rs"], "nemotron_h-mtp-ff256": ["kv", "rs"],
    "lfm2-swa": ["kv", "kv", "rs"],
}
SWA_MODELS = {"gemma2-swa", "gemma3-swa", "gemma3-pattern", "gemma3n", "gpt-oss", "lfm2-swa"}
# models that also get the two-sequence cases (n_seq_max 2, kv_unified false and true)
MULTI_SEQ_MODELS = {"llama-gqa", "gemma2-swa", "deepseek2-mla", "mamba2", "granitehybrid", "lfm2-swa"}
# of those, the ones that also get a shared prefix (tokens in sequences 0 and 1 at once; unified cache only)
SHARED_MODELS = {"llama-gqa", "gemma2-swa", "deepseek2-mla"}
# models that get more cache types
MORE_TYPES_MODELS = {"llama-gqa", "gemma3-swa", "deepseek2-mla", "granitehybrid"}

N_TOKENS = [0, 1, 5, 64, 300]
N_CTX = 1024
# (type_k, type_v, flash_attn)
CONFIGS = [("f16", "f16", "disabled"), ("f16", "f16", "enabled"), ("q8_0", "q8_0", "enabled"),
           ("q8_0", "f16", "disabled"), ("f16", "f16", "auto")]
MORE_CONFIGS = [("f32", "f32", "disabled"), ("bf16", "bf16", "enabled"), ("q4_0", "q4_0", "enabled"),
                ("q5_1", "iq4_nl", "enabled"), ("q4_0", "f32", "disabled")]


def build_cases(name: str, quick: bool) -> list[dict]:
    base = dict(n_ctx=N_CTX, n_batch=512, n_ubatch=512, n_seq_max=1, kv_unified=False, swa_full=True)
    ns = [0, 5, 300] if quick else N_TOKENS
    cases = []

    def add(params, seqs):
        cases.append(dict(params=params, seqs=seqs))

    configs = CONFIGS + (MORE_CONFIGS if name in MORE_TYPES_MODELS and not quick else [])
    for tk, tv, fa in configs:
        for n in ns:
            add(dict(base, type_k=tk, type_v=tv, flash_attn=fa), [dict(seq=0, tokens=n)])
    if name in SWA_MODELS:  # llama-server's default (swa_full off), also with small ubatches (the SWA cache evicts)
        for n_ubatch in (512, 32):
            for fa in ("disabled", "enabled"):
                for n in ns:
                    add(dict(base, type_k="f16", type_v="f16", flash_attn=fa, swa_full=False, n_ubatch=n_ubatch,
                             n_batch=512), [dict(seq=0, tokens=n)])
    if name in MULTI_SEQ_MODELS:
        for unified in (False, True):
            for fa in ("disabled", "enabled"):
                for n in ns:
                    add(dict(base, type_k="f16", type_v="f16", flash_attn=fa, n_seq_max=2, kv_unified=unified),
                        [dict(seq=0, tokens=n), dict(seq=1, tokens=7)])
    if name in SHARED_MODELS:
        for fa in ("disabled", "enabled"):
            for n in ns:
                # 8 tokens in both sequences (one batch, seq_id {0,1}), then n more in 0 and 3 more in 1
                add(dict(base, type_k="f16", type_v="f16", flash_attn=fa, n_seq_max=2, kv_unified=True),
                    [dict(seq=[0, 1], tokens=8), dict(seq=0, tokens=n), dict(seq=1, tokens=3)])
    for i, c in enumerate(cases):
        c["id"] = i
    return cases


# ---------------------------------------------------------------------------------------------------------------
# the header parser (ours): walks a seq-state blob the way llama.cpp's state_read does, skipping tensor bytes
class Reader:
    def __init__(self, buf: bytes, pos: int = 0):
        self.buf, self.pos = buf, pos

    def take(self, fmt: str):
        v = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def skip(self, n: int):
        if self.pos + n > len(self.buf):
            raise ValueError(f"skip {n} past the end at {self.pos}/{len(self.buf)}")
        self.pos += n


def parse_kv(r: Reader, has_v: bool) -> dict:
    start = r.pos
    n_stream = r.take("I")
    streams = []
    for _ in range(n_stream):
        cc = r.take("I")
        st = dict(cells=cc)
        streams.append(st)
        if cc == 0:
            continue
        pos, nsid = [], []
        for _ in range(cc):
            p, ns = r.take("iI")
            sids = [r.take("i") for _ in range(ns)]  # (no cell ext: none of these models uses M-RoPE or PLE)
            pos.append(p)
            nsid.append(ns)
            st.setdefault("seq_ids", set()).update(sids)
        st["pos"] = [min(pos), max(pos)]
        st["n_seq_id"] = sorted(set(nsid))
        st["seq_ids"] = sorted(st["seq_ids"])
        v_trans, n_layer = r.take("II")
        st["v_trans"], st["n_layer"] = v_trans, n_layer
        k = []
        for _ in range(n_layer):
            t, row = r.take("iQ")
            r.skip(cc * row)
            k.append([TYPE_NAMES.get(t, t), row])
        st["k"] = k
        v = []
        if has_v:
            for _ in range(n_layer):
                if not v_trans:
                    t, row = r.take("iQ")
                    r.skip(cc * row)
                    v.append([TYPE_NAMES.get(t, t), row])
                else:
                    t, el, n_embd = r.take("iII")
                    r.skip(cc * el * n_embd)
                    v.append([TYPE_NAMES.get(t, t), el, n_embd])
        st["v"] = v
    return dict(kind="kv", n_stream=n_stream, streams=streams, bytes=r.pos - start)


def parse_rs(r: Reader, n_rs_layers: int) -> dict:
    """n_rs_layers: how many layers hold a recurrent state (r_l non-null); the blob does not say (its n_layer field
    is hparams.n_layer(), every layer), so it comes from llama.cpp's hparams (is_recr) in the reference fixture."""
    start = r.pos
    cc = r.take("I")
    pos, nsid = [], []
    for _ in range(cc):
        p, ns = r.take("iI")
        for _ in range(ns):
            r.take("i")
        pos.append(p)
        nsid.append(ns)
    s_trans, n_layer = r.take("II")
    rows = {}
    for key in ("r", "s"):  # (no PLE rows: none of these models has a PLE conv state)
        out = []
        for _ in range(n_rs_layers):
            t, row = r.take("iQ")
            r.skip(cc * row)
            out.append([TYPE_NAMES.get(t, t), row])
        rows[key] = out
    return dict(kind="rs", cells=cc, pos=pos, n_seq_id=sorted(set(nsid)), s_trans=s_trans, n_layer=n_layer,
                r=rows["r"], s=rows["s"], bytes=r.pos - start)


def parse_blob(buf: bytes, sections: list[str], n_rs_layers: int, with_magic: bool = True) -> list[dict]:
    r = Reader(buf)
    if with_magic:
        magic, _seq = r.take("Ii")
        assert magic == IO_MAGIC, hex(magic)
    out = []
    for s in sections:
        if s == "rs":
            out.append(parse_rs(r, n_rs_layers))
        else:
            out.append(parse_kv(r, has_v=(s == "kv")))
    if r.pos != len(buf):
        raise ValueError(f"parse stopped at {r.pos} of {len(buf)}")
    return out


# ---------------------------------------------------------------------------------------------------------------
# worker (inside the scratch venv)
def worker(args):
    import llama_cpp as L

    logs: list[tuple[int, str]] = []

    @L.llama_log_callback
    def _cb(level, text, ud):
        logs.append((int(level), text.decode(errors="replace")))

    L.llama_log_set(_cb, None)
    L.llama_backend_init()
    cases = [json.loads(x) for x in Path(args.cases).read_text().splitlines()]
    spec = json.loads(Path(args.spec).read_text())
    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = L.llama_model_load_from_file(args.gguf.encode(), mp)
    assert model, [t for _, t in logs[-5:]]

    def emit(rec):
        with open(args.results, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
    tmpdir = Path(args.results).parent / "files"  # the save_file outputs, deleted after each is measured
    tmpdir.mkdir(exist_ok=True)

    def toks(n, off=0):
        return [1 + (off + i) % 250 for i in range(n)]

    for c in cases[args.start:]:
        print(json.dumps(dict(start=c["id"])), file=sys.stderr, flush=True)
        t0 = time.time()
        p = c["params"]
        cp = L.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch = p["n_ctx"], p["n_batch"], p["n_ubatch"]
        cp.n_seq_max, cp.kv_unified, cp.swa_full = p["n_seq_max"], p["kv_unified"], p["swa_full"]
        cp.type_k, cp.type_v = TYPES[p["type_k"]], TYPES[p["type_v"]]
        cp.flash_attn_type = FA[p["flash_attn"]]
        cp.n_threads = cp.n_threads_batch = 2
        logs.clear()
        ctx = L.llama_init_from_model(model, cp)
        rec = dict(id=c["id"], ok=bool(ctx))
        if not ctx:
            rec["refusal"] = [t.strip() for lvl, t in logs if lvl >= 4][-4:]
            emit(rec)
            continue
        rec["ctx"] = dict(n_ctx=L.llama_n_ctx(ctx), n_ctx_seq=L.llama_n_ctx_seq(ctx), n_batch=L.llama_n_batch(ctx),
                          n_ubatch=L.llama_n_ubatch(ctx), n_seq_max=L.llama_n_seq_max(ctx))
        mem = L.llama_get_memory(ctx)
        next_pos: dict[int, int] = {}
        decoded: dict[int, list[int]] = {}
        err = None
        for step in c["seqs"]:
            seqs = step["seq"] if isinstance(step["seq"], list) else [step["seq"]]
            n = step["tokens"]
            if n == 0:
                continue
            p0 = next_pos.get(seqs[0], 0)
            tk = toks(n, p0)
            b = L.llama_batch_init(n, 0, len(seqs))
            b.n_tokens = n
            for i in range(n):
                b.token[i] = tk[i]
                b.pos[i] = p0 + i
                b.n_seq_id[i] = len(seqs)
                for j, s in enumerate(seqs):
                    b.seq_id[i][j] = s
                b.logits[i] = 1 if i == n - 1 else 0
            rc = L.llama_decode(ctx, b)
            L.llama_batch_free(b)
            if rc != 0:
                err = f"llama_decode returned {rc}: " + " | ".join(t.strip() for lvl, t in logs if lvl >= 3)[-400:]
                break
            for s in seqs:
                next_pos[s] = p0 + n
                decoded.setdefault(s, []).extend(tk)
        if err:
            rec["ok"] = False
            rec["decode_error"] = err
        else:
            rec["seqs"] = {}
            for s in sorted({x for st in c["seqs"] for x in (st["seq"] if isinstance(st["seq"], list) else [st["seq"]])}):
                tk = decoded.get(s, [])
                size = L.llama_state_seq_get_size(ctx, s)
                size_partial = L.llama_state_seq_get_size_ext(ctx, s, 1)
                buf = (ctypes.c_uint8 * max(size, 1))()
                got = L.llama_state_seq_get_data(ctx, buf, size, s)
                blob = bytes(buf[:got])
                f = tmpdir / f"seq{s}.bin"
                arr = (L.llama_token * max(len(tk), 1))(*tk)
                ret = L.llama_state_seq_save_file(ctx, str(f).encode(), s, arr, len(tk))
                fbytes = f.read_bytes()
                magic, version, n_tok = struct.unpack_from("<III", fbytes, 0)
                same = fbytes[12 + 4 * n_tok:] == blob[8:]
                # llama-server's packing of a text-only prompt (server_tokens::serialize): n + 4 tokens
                packed = [LLAMA_TOKEN_NULL, 1, len(tk)] + tk + [0]
                arr2 = (L.llama_token * len(packed))(*packed)
                f2 = tmpdir / f"seq{s}-server.bin"
                ret2 = L.llama_state_seq_save_file(ctx, str(f2).encode(), s, arr2, len(packed))
                srec = dict(tokens_decoded=len(tk),
                            pos=[L.llama_memory_seq_pos_min(mem, s), L.llama_memory_seq_pos_max(mem, s)],
                            seq_bytes=size, seq_bytes_partial=size_partial, file_bytes=f.stat().st_size,
                            file_header=[hex(magic), version, n_tok], file_state_equals_get_data_minus_8=same,
                            file_bytes_server=f2.stat().st_size, server_n_token_count=len(packed))
                # llama.cpp's return values, kept only where they differ from the sizes above
                for k, v, ref_v in (("get_data_bytes", got, size), ("save_file_return", ret, srec["file_bytes"]),
                                    ("save_file_return_server", ret2, srec["file_bytes_server"])):
                    if v != ref_v:
                        srec[k] = v
                try:
                    srec["sections"] = parse_blob(blob, spec["sections"], spec["n_rs_layers"])
                except Exception as exc:  # noqa: BLE001
                    srec["parse_error"] = f"{type(exc).__name__}: {exc}"
                f.unlink()
                f2.unlink()
                rec["seqs"][str(s)] = srec
        L.llama_free(ctx)
        rec["elapsed_ms"] = round((time.time() - t0) * 1000, 1)
        emit(rec)


# ---------------------------------------------------------------------------------------------------------------
# driver
def full_gguf(name: str, ref: dict, work: Path) -> Path:
    m = ref["models"][name]
    path = work / "models" / f"{name}.gguf"
    if path.exists() and path.stat().st_size == m["gguf_file_size"]:
        if hashlib.sha256(path.read_bytes()).hexdigest() == m["gguf_sha256"]:
            return path
    meta = (GGUF_DIR / f"llamacpp-{name}.gguf").read_bytes()
    data = meta + bytes(m["gguf_file_size"] - len(meta))
    if hashlib.sha256(data).hexdigest() != m["gguf_sha256"]:
        raise SystemExit(f"{name}: rebuilt GGUF does not match gguf_sha256 of {REF_FIXTURE.name}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def run_model(name: str, ref: dict, work: Path, quick: bool, py: str) -> list[dict]:
    gguf = full_gguf(name, ref, work)
    hp = ref["models"][name]["hparams"]
    n_rs_layers = sum(1 for il in range(hp["n_layer"]) if hp["is_recr"][il])
    cases = build_cases(name, quick)
    cdir = work / "cases"
    cdir.mkdir(parents=True, exist_ok=True)
    cpath, rpath, spath = cdir / f"{name}.cases.jsonl", cdir / f"{name}.results.jsonl", cdir / f"{name}.spec.json"
    cpath.write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    spath.write_text(json.dumps(dict(sections=SECTIONS[name], n_rs_layers=n_rs_layers)))
    rpath.write_text("")
    start = 0
    crashed = {}
    while start < len(cases):
        r = subprocess.run([py, str(HERE), "--_worker", "--cases", str(cpath), "--results", str(rpath),
                            "--spec", str(spath), "--gguf", str(gguf), "--start", str(start)],
                           capture_output=True, text=True, env=dict(os.environ, GGML_NO_BACKTRACE="1"), timeout=900)
        done = {json.loads(x)["id"] for x in rpath.read_text().splitlines()}
        if r.returncode == 0 and len(done) >= len(cases) - len(crashed):
            break
        started = [json.loads(x)["start"] for x in r.stderr.splitlines() if x.startswith('{"start"')]
        if not started:
            raise SystemExit(f"{name}: worker failed before any case:\n{r.stderr[-3000:]}")
        cid = started[-1]
        crashed[cid] = [x for x in r.stderr.splitlines() if x.strip() and not x.startswith('{"start"')][-4:]
        start = cid + 1
    res = {}
    for x in rpath.read_text().splitlines():
        d = json.loads(x)
        res[d["id"]] = d
    out = []
    for c in cases:
        d = res.get(c["id"]) or dict(ok=False, crashed=True, abort=crashed.get(c["id"], []))
        d = {k: v for k, v in d.items() if k != "id"}
        out.append(dict(model=name, gguf=f"{name}.gguf", params=c["params"], steps=c["seqs"], **d))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--work", default=str(DEFAULT_WORK))
    ap.add_argument("--models", default="", help="comma-separated subset of " + ",".join(SECTIONS))
    ap.add_argument("--quick", action="store_true", help="fewer token counts and no extra cache types")
    ap.add_argument("--_worker", action="store_true")
    ap.add_argument("--cases")
    ap.add_argument("--results")
    ap.add_argument("--spec")
    ap.add_argument("--gguf")
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args()
    if args._worker:
        return worker(args)

    import llama_cpp

    t0 = time.time()
    ref = json.loads(REF_FIXTURE.read_text())
    work = Path(args.work)
    names = [m for m in args.models.split(",") if m] or list(SECTIONS)
    all_cases = []
    for name in names:
        ts = time.time()
        cs = run_model(name, ref, work, args.quick, sys.executable)
        nok = sum(1 for c in cs if c.get("ok"))
        print(f"[{name}] {len(cs)} cases, {nok} ok, {time.time() - ts:.1f}s", file=sys.stderr)
        all_cases.extend(cs)
    for i, c in enumerate(all_cases):
        c["id"] = i
    doc = dict(
        generated_by="scripts/audit/llamacpp_state_reference.py",
        llama_cpp_python=llama_cpp.__version__, llama_cpp_commit="0c1e57098",
        build="CPU only, from source (pip --no-binary :all:): CMAKE_ARGS=-DGGML_NATIVE=OFF",
        units="bytes",
        models_from="tests/fixtures/engine-ref/llamacpp-0.3.36.json (models[m]: GGUF metadata, gguf_sha256, "
                    "llama.cpp's hparams); the full GGUF = tests/fixtures/gguf/llamacpp-<m>.gguf + zero bytes",
        how=[
            "one llama_model per GGUF (n_gpu_layers 0, mmap); one llama_init_from_model per case from "
            "llama_context_default_params() with params set (n_threads 2); steps: batches decoded in order "
            "(seq: the sequence(s) every token of the batch belongs to, tokens: how many; positions continue per "
            "sequence; token ids 1 + i % 250)",
            "ctx: llama_n_ctx, llama_n_ctx_seq, llama_n_batch, llama_n_ubatch, llama_n_seq_max",
            "seqs[s]: seq_bytes = llama_state_seq_get_size(ctx, s); seq_bytes_partial = "
            "llama_state_seq_get_size_ext(ctx, s, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY); pos = "
            "[llama_memory_seq_pos_min, llama_memory_seq_pos_max]; file_bytes = on-disk size of "
            "llama_state_seq_save_file(ctx, path, s, the decoded tokens, n); file_header = the file's first 3 u32 "
            "(magic 'ggsq', version, token count); get_data_bytes (llama_state_seq_get_data's return) and "
            "save_file_return[_server] (llama_state_seq_save_file's return) appear only where they differ from "
            "seq_bytes / file_bytes[_server]; file_state_equals_get_data_minus_8: the file after its "
            "12 + 4*n header is byte-identical to the get_data blob after its 8-byte (io_magic, seq_id) header",
            "file_bytes_server: the same call with llama-server's token packing (server_tokens::serialize of a "
            "text-only prompt: LLAMA_TOKEN_NULL, 1, n, tokens, 0 = n + 4 tokens), i.e. the file POST "
            "/slots/{id}?action=save writes; its response's n_written is that size, n_saved is n",
            "sections: our parse of the get_data blob (kv: n_stream, per stream cells, pos range, distinct n_seq_id "
            "values, v_trans, n_layer, per layer K [type, row bytes] and V [type, row bytes] or, transposed, [type, "
            "element bytes, n_embd_v_gqa]; rs: cells, n_layer field, per recurrent layer r/s [type, row bytes]); "
            "bytes = that section's size; the parse consumed the blob exactly",
            "refusal: llama.cpp's ERROR lines when llama_init_from_model returned NULL; crashed: the worker aborted",
        ],
        grid=dict(n_tokens=N_TOKENS, n_ctx=N_CTX, configs=CONFIGS, more_configs=MORE_CONFIGS,
                  more_configs_models=sorted(MORE_TYPES_MODELS), swa_models=sorted(SWA_MODELS),
                  multi_seq_models=sorted(MULTI_SEQ_MODELS), shared_prefix_models=sorted(SHARED_MODELS),
                  quick=args.quick),
        sections=SECTIONS,
        num_cases=len(all_cases),
        elapsed_s=round(time.time() - t0, 1),
        cases=all_cases,
    )
    for c in all_cases:
        c.pop("elapsed_ms", None)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    txt = json.dumps(doc, separators=(",", ":")).replace(',{"model":', ',\n{"model":')
    out.write_text(txt + "\n")
    print(f"wrote {out} ({out.stat().st_size} bytes, {len(all_cases)} cases) in {time.time() - t0:.0f}s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
