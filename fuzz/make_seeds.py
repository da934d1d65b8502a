#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/) from the checkpoints that
PyTorch 2.6 wrote (tests/fixtures/pytorch-2.6). Plain Python, no torch: a data file is a run of
torch.save zip archives, each ending with its end-of-central-directory record.

    python3 fuzz/make_seeds.py            # from the repository root; rewrites fuzz/corpus/
"""

import collections
import hashlib
import io
import pathlib
import pickle as pickle_module
import shutil
import signal
import struct
import types

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "pytorch-2.6"
CORPUS = ROOT / "fuzz" / "corpus"
CHECKPOINTS = ["single_rank_mixed", "two_rank_sharded", "model_optim_adam", "model_optim_adam_resume"]


def split_items(data):
    """The zip archives of a .distcp file, in file order."""
    items, start = [], 0
    while start < len(data):
        end = data.find(b"PK\x05\x06", start)
        if end < 0:
            raise ValueError("trailing bytes after the last archive")
        comment = struct.unpack_from("<H", data, end + 20)[0]
        items.append(data[start : end + 22 + comment])
        start = end + 22 + comment
    return items


def records(archive):
    """{name: payload} of a stored zip, from its central directory."""
    end = archive.rfind(b"PK\x05\x06")
    count, _, offset = struct.unpack_from("<HII", archive, end + 10)
    out = {}
    for _ in range(count):
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", archive, offset + 28)
        size = struct.unpack_from("<I", archive, offset + 24)[0]
        local = struct.unpack_from("<I", archive, offset + 42)[0]
        name = archive[offset + 46 : offset + 46 + name_len].decode()
        local_name, local_extra = struct.unpack_from("<HH", archive, local + 26)
        start = local + 30 + local_name + local_extra
        out[name] = archive[start : start + size]
        offset += 46 + name_len + extra_len + comment_len
    return out


def write_unique(folder, name, data, seen):
    digest = hashlib.sha1(data).hexdigest()
    if digest in seen:
        return
    seen.add(digest)
    (folder / name).write_bytes(data)


def python_values():
    return {
        "set": {3, 1, 2}, "frozenset": frozenset({"a"}), "bytes": b"\x00\x7f\x80\xff",
        "empty_bytes": b"", "big_ints": [2**70, -2**100, 2**63],
        "tuple_keys": {(1, 2): [3], (4, 5): [6]}, "mixed_keys": {1: "one", "two": 2},
        "signal_enum": signal.SIGTERM, "path": pathlib.PosixPath("/tmp/x"),
        "simple_namespace": types.SimpleNamespace(a=1, b="x"),
        "floats": [float("nan"), float("inf"), -0.0, 1 + 2j], "bytesio": io.BytesIO(b"abc"),
        "defaultdict": collections.defaultdict(int, {"a": 1, "b": 2}),
    }


def main():
    folders = {t: CORPUS / t for t in
               ["pickle_reader_fuzzer", "zip_blob_reader_fuzzer", "metadata_fuzzer", "item_fuzzer"]}
    for folder in folders.values():  # regression-* seeds (inputs that once failed) are kept
        for seed in folder.glob("*") if folder.exists() else []:
            if not seed.name.startswith("regression-"):
                seed.unlink()
        folder.mkdir(parents=True, exist_ok=True)
    seen = {t: set() for t in folders}
    for checkpoint in CHECKPOINTS:
        directory = FIXTURES / checkpoint
        metadata = (directory / ".metadata").read_bytes()
        write_unique(folders["metadata_fuzzer"], f"{checkpoint}.metadata", metadata,
                     seen["metadata_fuzzer"])
        write_unique(folders["pickle_reader_fuzzer"], f"{checkpoint}.metadata", metadata,
                     seen["pickle_reader_fuzzer"])
        for data_file in sorted(directory.glob("*.distcp")):
            for i, item in enumerate(split_items(data_file.read_bytes())):
                name = f"{checkpoint}-{data_file.stem}-item{i:02d}"
                for target in ["zip_blob_reader_fuzzer", "item_fuzzer"]:
                    write_unique(folders[target], name + ".zip", item, seen[target])
                pickle = next(p for n, p in records(item).items() if n.endswith("/data.pkl"))
                write_unique(folders["pickle_reader_fuzzer"], name + "-data.pkl", pickle,
                             seen["pickle_reader_fuzzer"])
    # torch.save of a whole state dict: many records in one archive.
    archive = (FIXTURES / "torch_save_state_dict.pt").read_bytes()
    for target in ["zip_blob_reader_fuzzer", "item_fuzzer"]:
        write_unique(folders[target], "torch_save_state_dict.pt", archive, seen[target])
    pickle = next(p for n, p in records(archive).items() if n.endswith("/data.pkl"))
    write_unique(folders["pickle_reader_fuzzer"], "torch_save_state_dict-data.pkl", pickle,
                 seen["pickle_reader_fuzzer"])
    # Every kind of Python value a common state holds besides PyTorch's (docs/megatron.md,
    # "Values"), as CPython's pickle writes them: protocol 2 as torch.save, and protocol 4.
    for name, value in python_values().items():
        write_unique(folders["pickle_reader_fuzzer"], f"py_{name}-data.pkl",
                     pickle_module.dumps(value, protocol=2), seen["pickle_reader_fuzzer"])
    write_unique(folders["pickle_reader_fuzzer"], "py_protocol4-data.pkl",
                 pickle_module.dumps(python_values(), protocol=4), seen["pickle_reader_fuzzer"])
    for target, folder in folders.items():
        files = list(folder.iterdir())
        print(f"{target}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()
