"""tests/ckpt/interop.py: accelrun's checkpoints against the real `safetensors`.

Run by tests/ckpt/interop.sh inside a virtual environment that has
safetensors (and, from Debian, numpy and torch).  The C side is
tests/ckpt/ckpt_tool (save, consolidate, st-read):

  a. ckpt_tool saves a checkpoint of known tensors (F32, BF16, F16; a
     scalar, 1-D, 2-D, 3-D; optimizer state) with W ranks, dumps the full
     tensors as the truth, and consolidates it twice: with the default shard
     size (one model.safetensors) and with a small one (shards and an index);
  b. safetensors reads every rank file and every consolidated file: the
     metadata says format=pt, each tensor rebuilt from the manifest's pieces
     equals the truth bit for bit, the consolidated files hold exactly the
     model (no optim.*), with global shapes, and the index adds up;
  c. safetensors writes files (numpy, and torch bf16) that the C reader
     must accept with the same names, types, shapes, offsets and bytes; and
     broken files must be refused by both readers alike.

Prints TAP-like lines ("ok - ...", "not ok - ...", "ok - ... # SKIP why") and
a closing "ckpt-interop: N passed, N failed, N skipped"; exit status 1 when
anything failed.
"""

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import traceback

import numpy as np
import safetensors
import safetensors.numpy as stn
from safetensors import safe_open

try:
    import torch
    import safetensors.torch as stt

    TORCH = None
    torch.zeros(1, dtype=torch.bfloat16)
except Exception as e:  # noqa: BLE001 - any failure means "no torch here"
    torch = None
    TORCH = f"torch is not usable here ({type(e).__name__}: {e})"

passed = failed = skipped = 0


def ok(name):
    global passed
    passed += 1
    print(f"ok - {name}", flush=True)


def bad(name, detail=""):
    global failed
    failed += 1
    print(f"not ok - {name}", flush=True)
    for line in str(detail).splitlines()[-15:]:
        print(f"#   {line}", flush=True)


def skip(name, why):
    global skipped
    skipped += 1
    print(f"ok - {name} # SKIP {why}", flush=True)


def check(name, cond, detail=""):
    if cond:
        ok(name)
    else:
        bad(name, detail)
    return cond


def fnv1a64(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


ESIZE = {"F32": 4, "BF16": 2, "F16": 2}
MAX_ERRORS = 5


def header(path):
    """The header as Python's own json reads it: (json dict, data start)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)), 8 + n


def tensor_bytes(path):
    """{name: (dtype, shape, raw little-endian bytes)} read by safetensors:
    numpy's load_file when the file holds no BF16 (numpy has none), else
    safe_open with torch.  None when BF16 is there and torch is not."""
    with safe_open(path, framework="np") as f:
        dtypes = {k: f.get_slice(k).get_dtype() for k in f.keys()}
    out = {}
    if "BF16" not in dtypes.values():
        for k, a in stn.load_file(path).items():
            out[k] = (dtypes[k], list(a.shape), np.ascontiguousarray(a).tobytes())
        return out
    if torch is None:
        return None
    with safe_open(path, framework="pt") as f:
        for k in f.keys():
            t = f.get_tensor(k)
            raw = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
            out[k] = (dtypes[k], list(t.shape), raw.contiguous().numpy().tobytes())
    return out


def metadata(path):
    with safe_open(path, framework="np") as f:
        return f.metadata()


def truth(dump):
    with open(os.path.join(dump, "tensors.json")) as f:
        desc = json.load(f)
    out = {}
    for name, d in desc.items():
        with open(os.path.join(dump, name + ".bin"), "rb") as f:
            out[name] = (d["dtype"], d["shape"], f.read())
    return out


def run(*args):
    return subprocess.run(args, capture_output=True, text=True, check=False)


# ---------------------------------------------------------------- a, b


def check_rank_files(ckdir, want):
    with open(os.path.join(ckdir, "manifest.json")) as f:
        man = json.load(f)
    world = man["world_size"]
    files = [os.path.join(ckdir, e["name"]) for e in man["files"]]
    at = f"world {world}"
    check(
        f"{at}: manifest: world size, file names, all tensors",
        len(files) == world
        and all(
            os.path.basename(p) == f"rank-{r:05d}-of-{world:05d}.safetensors"
            for r, p in enumerate(files)
        )
        and set(man["tensors"]) == set(want),
        f"world {world}, files {man['files']}, tensors {sorted(man['tensors'])}",
    )
    loaded, errors = [], []
    for r, p in enumerate(files):
        try:
            meta = metadata(p)
            if not meta or meta.get("format") != "pt":
                errors.append(f"{p}: __metadata__ {meta}")
            loaded.append(tensor_bytes(p))
        except Exception as e:  # noqa: BLE001
            errors.append(f"{p}: {type(e).__name__}: {e}")
            loaded.append({})
    if any(x is None for x in loaded):
        skip(f"{at}: safetensors reads every rank file (BF16 through torch)", TORCH)
        return
    check(
        f"{at}: safetensors reads all {world} rank files, each with __metadata__ format=pt",
        not errors,
        "\n".join(errors),
    )
    # every tensor from the manifest's pieces, against the truth
    errors = []
    for name, t in sorted(man["tensors"].items()):
        dtype, shape, raw = want[name]
        esz = ESIZE[dtype]
        buf = bytearray(len(raw))
        covered = 0
        for file, lo, hi, _sum in t["pieces"]:
            got = loaded[file].get(name)
            if got is None or got[0] != dtype or got[1] != [hi - lo]:
                errors.append(
                    f"{name}: rank {file} has {got and got[:2]}, want {dtype} [{hi - lo}]"
                )
                continue
            buf[lo * esz : hi * esz] = got[2]
            covered += hi - lo
        if t["dtype"] != dtype or t["shape"] != shape:
            errors.append(f"{name}: manifest says {t['dtype']} {t['shape']}, want {dtype} {shape}")
        elif bytes(buf) != raw or covered * esz != len(raw):
            errors.append(f"{name}: the pieces do not rebuild the saved tensor")
    extra = [
        (r, k) for r, d in enumerate(loaded) for k in d
        if not any(p[0] == r for p in man["tensors"].get(k, {"pieces": []})["pieces"])
    ]
    if extra:
        errors.append(f"tensors in rank files that the manifest does not place there: {extra}")
    check(
        f"{at}: every tensor rebuilt from its pieces in the rank files is bit-exact "
        f"({len(man['tensors'])} tensors)",
        not errors,
        "\n".join(errors[:MAX_ERRORS]),
    )


def check_model_file(path, want, label):
    try:
        meta = metadata(path)
        got = tensor_bytes(path)
    except Exception as e:  # noqa: BLE001
        bad(f"{label}: safetensors opens it", f"{type(e).__name__}: {e}")
        return None
    if got is None:
        skip(f"{label}: tensors through safetensors", TORCH)
        return None
    errors = []
    if meta != {"format": "pt"}:
        errors.append(f"__metadata__ is {meta}, want {{'format': 'pt'}}")
    for name, (dtype, shape, raw) in got.items():
        if name not in want:
            errors.append(f"{name}: not a model tensor")
        elif (dtype, shape, raw) != want[name]:
            errors.append(
                f"{name}: {dtype} {shape} differs from the saved {want[name][:2]} or its bytes do"
            )
    check(f"{label}: metadata format=pt, global shapes, bytes equal the saved tensors", not errors,
          "\n".join(errors[:MAX_ERRORS]))
    return got


def hf_split(names_sizes, limit):
    """huggingface_hub's split_state_dict_into_shards_factory (its algorithm, which the
    pinned huggingface_hub does not need to be installed for)."""
    shards, cur, cur_size = [], [], 0
    for name, size in names_sizes:
        if size > limit:
            shards.append([name])
            continue
        if cur and cur_size + size > limit:
            shards.append(cur)
            cur, cur_size = [], 0
        cur.append(name)
        cur_size += size
    if cur:
        shards.append(cur)
    return shards


def check_single(out, model):
    files = sorted(os.listdir(out))
    check("consolidate (default size): model.safetensors only",
          files == ["model.safetensors"], f"{files}")
    got = check_model_file(os.path.join(out, "model.safetensors"), model, "model.safetensors")
    if got is not None:
        check("model.safetensors holds every model tensor and no optim.*", set(got) == set(model),
              f"missing {sorted(set(model) - set(got))}, extra {sorted(set(got) - set(model))}")


def check_sharded(out, model, limit):
    index_path = os.path.join(out, "model.safetensors.index.json")
    try:
        with open(index_path) as f:
            index = json.load(f)
    except Exception as e:  # noqa: BLE001
        bad("sharded: model.safetensors.index.json is JSON", f"{type(e).__name__}: {e}")
        return
    with open(index_path) as f:
        text = f.read()
    check("index: the text transformers writes (json.dumps(indent=2, sort_keys=True) + newline)",
          text == json.dumps(index, indent=2, sort_keys=True) + "\n", text[:300])
    wm = index.get("weight_map", {})
    total = sum(len(raw) for _, _, raw in model.values())
    check("index: metadata.total_size is the sum of the tensors' bytes",
          index.get("metadata", {}).get("total_size") == total,
          f"total_size {index.get('metadata')}, tensors hold {total}")
    check("index: weight_map names every model tensor, and only those", set(wm) == set(model),
          f"missing {sorted(set(model) - set(wm))}, extra {sorted(set(wm) - set(model))}")
    shard_files = sorted(set(wm.values()))
    n = len(shard_files)
    names = [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
    names_ok = n > 1 and shard_files == names
    present = sorted(f for f in os.listdir(out) if f.endswith(".safetensors"))
    check(f"shards: {n} files named model-0000i-of-{n:05d}.safetensors, all there, "
          "no model.safetensors",
          names_ok and present == shard_files,
          f"weight_map files {shard_files}, directory {present}")
    errors = []
    for fname in shard_files:
        got = check_model_file(os.path.join(out, fname), model, fname)
        if got is None:
            continue
        want_names = {k for k, v in wm.items() if v == fname}
        if set(got) != want_names:
            errors.append(f"{fname}: holds {sorted(got)}, the index says {sorted(want_names)}")
        size = sum(len(raw) for _, _, raw in got.values())
        if size > limit and len(got) > 1:
            errors.append(f"{fname}: {size} bytes in {len(got)} tensors, over the limit {limit}")
    check(f"shards: each holds what the index says, at most {limit} bytes unless one tensor",
          not errors,
          "\n".join(errors[:MAX_ERRORS]))
    ours = [sorted(k for k, v in wm.items() if v == f) for f in sorted(shard_files)]
    theirs = [sorted(x) for x in hf_split(sorted((k, len(v[2])) for k, v in model.items()), limit)]
    check(f"shards: the split and the file order are huggingface_hub's ({len(theirs)} shards)",
          ours == theirs, f"huggingface_hub: {theirs}\naccelrun:        {ours}")


# ---------------------------------------------------------------- c


def c_read(tool, path):
    r = run(tool, "st-read", path)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {"ok": False, "error": f"exit {r.returncode}: {r.stdout}{r.stderr}"}


def check_c_reads(tool, path, want, label):
    """want: {name: (dtype, shape, raw)}; plus offsets from Python's own header parse."""
    got = c_read(tool, path)
    if not got.get("ok"):
        bad(f"{label}: the C reader accepts it", got.get("error"))
        return
    hdr, start = header(path)
    errors = []
    if got["data_start"] != start:
        errors.append(f"data_start {got['data_start']}, the file says {start}")
    if got["metadata"] != (hdr.get("__metadata__") or {}):
        errors.append(f"metadata {got['metadata']}, the file has {hdr.get('__metadata__')}")
    if set(got["tensors"]) != set(want):
        errors.append(f"tensors {sorted(got['tensors'])}, want {sorted(want)}")
    for name, (dtype, shape, raw) in want.items():
        t = got["tensors"].get(name)
        if t is None:
            continue
        if t["dtype"] != dtype or t["shape"] != shape:
            errors.append(f"{name}: {t['dtype']} {t['shape']}, want {dtype} {shape}")
        if [t["begin"], t["end"]] != hdr[name]["data_offsets"]:
            errors.append(f"{name}: offsets {t['begin']}..{t['end']}, "
                          f"the file has {hdr[name]['data_offsets']}")
        if t["fnv1a64"] != fnv1a64(raw):
            errors.append(f"{name}: the C reader's bytes differ")
    check(f"{label}: the C reader accepts it with the same tensors, offsets, bytes and metadata",
          not errors, "\n".join(errors[:MAX_ERRORS]))


def rewrite(path, out, hdr_bytes=None, data=None, tail=b"", cut=0):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        h = f.read(n)
        d = f.read()
    h = h if hdr_bytes is None else hdr_bytes
    d = d if data is None else data
    b = struct.pack("<Q", len(h)) + h + d + tail
    with open(out, "wb") as f:
        f.write(b[: len(b) - cut] if cut else b)


def py_verdict(path):
    try:
        with safe_open(path, framework="np") as f:
            for k in f.keys():
                f.get_tensor(k)
        return True, ""
    except Exception as e:  # noqa: BLE001
        return False, f"{type(e).__name__}: {e}"


def check_broken(tool, tmp, base):
    """The same verdict from both readers on crafted files."""
    hdr, _ = header(base)
    with open(base, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        text = f.read(n)
        data = f.read()
    js = text.rstrip(b" ")

    def jdump(o):
        return json.dumps(o, separators=(",", ":")).encode()

    tensors = [k for k in hdr if k != "__metadata__"]
    first = min(tensors, key=lambda k: hdr[k]["data_offsets"][0])
    dup = js[:-1] + b"," + jdump({first: hdr[first]})[1:]
    overlap = dict(hdr)
    overlap[first] = dict(hdr[first], data_offsets=[1, hdr[first]["data_offsets"][1] + 1])
    unknown = dict(hdr)
    unknown[first] = dict(hdr[first], dtype="F128")
    extra = dict(hdr)
    extra[first] = dict(hdr[first], offset=0)
    meta_int = dict(hdr)
    meta_int["__metadata__"] = {"format": "pt", "n": 1}
    float_offsets = js.replace(
        jdump(hdr[first]["data_offsets"]),
        ("[%d.0,%d]" % tuple(hdr[first]["data_offsets"])).encode(),
    )
    # (name, how to make it, what safetensors says, what the C reader says)
    cases = [
        ("a trailing byte", dict(tail=b"\0"), False, False),
        ("one byte short", dict(cut=1), False, False),
        ("header length past the end", dict(hdr_bytes=text, data=b""), False, False),
        ("garbage after the JSON", dict(hdr_bytes=js + b"xyz"), False, False),
        ("a control byte as whitespace", dict(hdr_bytes=b"{\x01" + js[1:]), False, False),
        # safetensors' serde keeps one of two equal entries; ckpt/st_int.h refuses a name twice
        ("the same tensor entry twice", dict(hdr_bytes=dup), True, False),
        ("overlapping offsets", dict(hdr_bytes=jdump(overlap)), False, False),
        ("an unknown dtype", dict(hdr_bytes=jdump(unknown)), False, False),
        # serde ignores unknown fields (the JSON schema forbids them); so does not ckpt/st.c
        ("an unknown tensor field", dict(hdr_bytes=jdump(extra)), True, False),
        ("a metadata value that is a number", dict(hdr_bytes=jdump(meta_int)), False, False),
        ("an offset written 0.0", dict(hdr_bytes=float_offsets), False, False),
        ("leading whitespace before the JSON", dict(hdr_bytes=b" \n" + js), True, True),
        ("no padding", dict(hdr_bytes=js), True, True),
        ("tab and newline padding", dict(hdr_bytes=js + b"\t\n\r "), True, True),
    ]
    errors = []
    for name, how, py_want, c_want in cases:
        p = os.path.join(tmp, "broken.safetensors")
        rewrite(base, p, **how)
        py_ok, py_err = py_verdict(p)
        c = c_read(tool, p)
        if py_ok != py_want or bool(c.get("ok")) != c_want:
            errors.append(
                f"{name}: safetensors {'accepts' if py_ok else 'refuses'} ({py_err or 'ok'}), "
                f"C {'accepts' if c.get('ok') else 'refuses'} ({c.get('error', 'ok')})"
            )
    agree = sum(py == c for _, _, py, c in cases)
    check(f"crafted files: both readers give the expected verdict on {len(cases)} cases "
          f"({agree} alike, {len(cases) - agree} where the C reader is stricter by design)",
          not errors, "\n".join(errors))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--world", type=int, default=3)
    ap.add_argument("--shard-bytes", type=int, default=2000)
    a = ap.parse_args()
    print(f"# safetensors {safetensors.__version__}, numpy {np.__version__}, "
          f"torch {torch.__version__ if torch is not None else 'absent'}", flush=True)

    # a: save and consolidate with the C library
    root, dump = os.path.join(a.tmp, "ck"), os.path.join(a.tmp, "truth")
    r = run(a.tool, "save", root, "--world", str(a.world), "--step", "100", "--seed", "42",
            "--dump", dump, "--meta", "run=interop")
    if not check(f"ckpt_tool saves a checkpoint with {a.world} ranks", r.returncode == 0,
                 r.stdout + r.stderr):
        return
    want = truth(dump)
    model = {k: v for k, v in want.items() if not k.startswith("optim.")}
    ckdir = os.path.join(root, "step-00000100")
    single, sharded = os.path.join(a.tmp, "hf"), os.path.join(a.tmp, "hf-sharded")
    r1 = run(a.tool, "consolidate", root, single)
    r2 = run(a.tool, "consolidate", root, sharded, str(a.shard_bytes))
    check("ckpt_tool consolidates it (default shard size, and 2000 bytes)",
          r1.returncode == 0 and r2.returncode == 0, r1.stderr + r2.stderr)

    # b: safetensors reads what the C library wrote
    check_rank_files(ckdir, want)
    check_single(single, model)
    check_sharded(sharded, model, a.shard_bytes)

    # b, at other world sizes: one rank, and more ranks than some tensors have elements
    for w in (1, 7):
        rootw = os.path.join(a.tmp, f"ck{w}")
        r = run(a.tool, "save", rootw, "--world", str(w), "--step", "7", "--seed", "42")
        if check(f"ckpt_tool saves the same tensors with {w} rank{'s' if w > 1 else ''}",
                 r.returncode == 0, r.stdout + r.stderr):
            check_rank_files(os.path.join(rootw, "step-00000007"), want)

    # c: the C reader reads what safetensors wrote
    rng = np.random.default_rng(7)
    arrays = {
        "embed.weight": rng.standard_normal((7, 5)).astype(np.float32),
        "half": rng.standard_normal((3, 1, 4)).astype(np.float16),
        "double": rng.standard_normal(3),
        "ids": np.arange(6, dtype=np.int64).reshape(2, 3),
        "bytes": np.frombuffer(b"accelrun", dtype=np.uint8).copy(),
        "mask": np.array([True, False, True]),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "scalar": np.array(2.5, dtype=np.float32),
    }
    np_path = os.path.join(a.tmp, "numpy.safetensors")
    stn.save_file(arrays, np_path,
                  metadata={"format": "np", "note": "written by safetensors.numpy"})
    st_name = {np.float32: "F32", np.float16: "F16", np.float64: "F64", np.int64: "I64",
               np.uint8: "U8", np.bool_: "BOOL"}
    check_c_reads(a.tool, np_path,
                  {k: (st_name[v.dtype.type], list(v.shape), v.tobytes())
                   for k, v in arrays.items()},
                  "safetensors.numpy.save_file")
    if torch is None:
        skip("safetensors.torch.save_file with bf16", TORCH)
    else:
        g = torch.Generator().manual_seed(3)
        ts = {
            "w": torch.randn(5, 7, generator=g).to(torch.bfloat16),
            "s": torch.tensor(1.5, dtype=torch.bfloat16),
            "h": torch.randn(4, generator=g).to(torch.float16),
        }
        pt_path = os.path.join(a.tmp, "torch.safetensors")
        stt.save_file(ts, pt_path, metadata={"format": "pt"})
        check_c_reads(a.tool, pt_path,
                      {k: ("BF16" if v.dtype == torch.bfloat16 else "F16", list(v.shape),
                           v.view(torch.int16).numpy().tobytes()) for k, v in ts.items()},
                      "safetensors.torch.save_file (bf16, f16)")
    check_broken(a.tool, a.tmp, np_path)


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001 - a crash is a failure with its traceback
        bad("interop.py ran to the end", traceback.format_exc())
    print(f"ckpt-interop: {passed} passed, {failed} failed, {skipped} skipped", flush=True)
    sys.exit(1 if failed else 0)
