"""Checks dcpp's pickles against real PyTorch (2.6 was used).

1. Write them: `dcpp_checkpoint_tests "[.interop]"` fills <build>/pickle-interop/ with .metadata files
   (the three fixtures decoded and re-encoded by dcpp, and a constructed one) and data_pkl/*.pkl
   (torch.save data.pkl pickles of values and tensors, with raw storages as *.bin).
2. From the repository root, with the reference environment:
     ../shared/tools/pytorch-ref/run.sh tests/interop/check_pickles.py \
         build-pickle/pickle-interop tests/fixtures/pytorch-2.6
   Every data.pkl must load with pickle and equal torch.save's bytes; every .metadata must load with
   pickle.load into DCP's own classes, equal the fixture's Metadata, and serve dcp.load.
"""
import io, os, pickle, shutil, sys, tempfile, zipfile
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.metadata import (
    BytesStorageMetadata, Metadata, MetadataIndex, TensorStorageMetadata)

root = sys.argv[1]
fixtures = sys.argv[2] if len(sys.argv) > 2 else None
failures = 0
def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    failures += 0 if cond else 1

def torch_save_pkl(obj):
    b = io.BytesIO(); torch.save(obj, b)
    z = zipfile.ZipFile(io.BytesIO(b.getvalue()))
    return z.read([n for n in z.namelist() if n.endswith('/data.pkl')][0])

# ---- data.pkl ----
d = os.path.join(root, 'data_pkl')
def load_pkl(name):
    data = open(os.path.join(d, name + '.pkl'), 'rb').read()
    class U(pickle.Unpickler):
        def persistent_load(self, pid):
            typename, storage_type, key, location, numel = pid
            assert typename == 'storage'
            dtype = storage_type.dtype if storage_type is not torch.UntypedStorage else torch.uint8
            path = os.path.join(d, f'{name}.{key}.bin')
            if os.path.exists(path):
                raw = bytearray(open(path, 'rb').read())
                us = torch.UntypedStorage.from_buffer(raw, dtype=torch.uint8) if raw else torch.UntypedStorage(0)
            else:
                us = torch.UntypedStorage(numel * (dtype.itemsize if storage_type is not torch.UntypedStorage else 1))
            return torch.storage.TypedStorage(wrap_storage=us, dtype=dtype, _internal=True)
    return data, U(io.BytesIO(data)).load()

values = {
    'int': 7, 'big_int': -(1 << 62), 'float': 0.1, 'str': 'abc', 'bool': True, 'none': None,
    'complex': complex(1.0, -2.5), 'betas': (0.9, 0.999), 'tuple4': (1, 2, 3, 4), 'list': [1, 2, 3],
    'dict': {'a': 1, 'b': [1.5, None]}, 'int_dict': {3: 'x', -1: None},
    'tensors': {'t': torch.ones(2), 'u': [torch.zeros(3, dtype=torch.int64)]},
    'long_list': [str(i) for i in range(2500)],
}
for name, expected in values.items():
    data, loaded = load_pkl(name)
    if name == 'tensors':
        same = torch.equal(loaded['t'], expected['t']) and torch.equal(loaded['u'][0], expected['u'][0])
    else:
        same = loaded == expected and type(loaded) == type(expected)
    check(same, f'data.pkl {name}: pickle.loads gives {type(loaded).__name__} equal to the expected value')
    check(data == torch_save_pkl(expected), f'data.pkl {name}: bytes identical to torch.save')

# Megatron-Core's Python objects, as dcpp writes them back (python_object.h): numpy arrays and an
# argparse.Namespace, read by Python's own pickle with numpy.
import argparse
import numpy as np
data, loaded = load_pkl('python_objects')
expected_arrays = {
    'bytes': np.arange(256, dtype=np.uint8).reshape(16, 16),
    'key': np.array([4294967295, 7], dtype=np.uint32),
    'halves': np.array([1.5, -2.25, 65504.0], dtype=np.float16),
}
for name, expected in expected_arrays.items():
    got = loaded[name]
    check(isinstance(got, np.ndarray) and got.dtype == expected.dtype and
          got.shape == expected.shape and np.array_equal(got, expected),
          f'data.pkl python_objects: numpy array {name} ({expected.dtype}) equal')
check(loaded['args'] == argparse.Namespace(hidden=8, name='tiny'),
      'data.pkl python_objects: argparse.Namespace with its attributes')

# Every other kind of Python value a common state holds, written by dcpp as CPython pickles it
# (python_values.h): the same bytes as torch.save's, and the same values.
import math, pathlib, signal
data, loaded = load_pkl('python_values')
expected = {
    'set': {1, 2, 3}, 'frozenset': frozenset({4}), 'bytes': b'\x00\x7f\x80\xff', 'empty_bytes': b'',
    'big': 2**70, 'negative_big': -2**100,
    'per_bucket_numel': {(torch.bfloat16, torch.float32): [64, 40]},
    'mixed_keys': {1: 'one', 'two': 2}, 'params_dtype': torch.bfloat16, 'size': torch.Size([4, 8]),
    'signal': signal.SIGTERM, 'nan': float('nan'),
}
for name, value in expected.items():
    got = loaded[name]
    same = (math.isnan(got) if name == 'nan' else got == value) and type(got) == type(value)
    check(same, f'data.pkl python_values: {name} loads as the {type(value).__name__} {value!r}')
check(data == torch_save_pkl(expected), 'data.pkl python_values: bytes identical to torch.save')
data, loaded = load_pkl('python_path')
check(loaded == pathlib.PosixPath('/tmp/x'), 'data.pkl python_path: loads as the PosixPath /tmp/x')

base12 = torch.arange(12, dtype=torch.float32)
tensors = {
    't_float_8x4': torch.zeros(8, 4), 't_bf16_16x8': torch.zeros(16, 8, dtype=torch.bfloat16),
    't_bool_3': torch.zeros(3, dtype=torch.bool), 't_scalar': torch.tensor(0.0),
    't_empty_0x3': torch.zeros(0, 3), 't_noncontig': base12.reshape(3, 4).t(),
    't_offset_row': torch.arange(12, dtype=torch.float64).reshape(3, 4)[1],
    't_requires_grad': torch.zeros(2, requires_grad=True),
    't_complex32': torch.zeros(2, dtype=torch.complex32),
    't_complex64': torch.zeros(2, dtype=torch.complex64),
    't_int16': torch.zeros(300, dtype=torch.int16),
}
for name, t in tensors.items():
    data, loaded = load_pkl(name)
    check(data == torch_save_pkl(t), f'data.pkl {name}: bytes identical to torch.save')
    check(loaded.shape == t.shape and loaded.stride() == t.stride() and loaded.dtype == t.dtype
          and loaded.storage_offset() == t.storage_offset() and loaded.requires_grad == t.requires_grad,
          f'data.pkl {name}: loads as {loaded.dtype} {tuple(loaded.shape)} stride {loaded.stride()}')

# ---- .metadata ----
def load_md(path):
    with open(path, 'rb') as f:
        return pickle.load(f)
for name in ['single_rank_mixed', 'two_rank_sharded', 'model_optim_adam']:
    ours = load_md(os.path.join(root, name + '.metadata'))
    check(isinstance(ours, Metadata), f'{name}.metadata: pickle.load gives {type(ours).__module__}.{type(ours).__name__}')
    if fixtures:
        theirs = load_md(os.path.join(fixtures, name, '.metadata'))
        # The fixtures come from PyTorch 2.6, whose StorageMeta has no `modules`; PyTorch 2.7+
        # declares the field without a class default, so its == fails on a 2.6 StorageMeta.
        if theirs.storage_meta is not None and not hasattr(theirs.storage_meta, 'modules'):
            theirs.storage_meta.modules = []
        check(ours == theirs, f'{name}.metadata: equal to the fixture Metadata (dataclass ==)')
        check([k.index for k in ours.storage_data] == [k.index for k in theirs.storage_data],
              f'{name}.metadata: MetadataIndex.index hints equal')
        check(ours.storage_meta.modules == [], f'{name}.metadata: StorageMeta.modules == []')
        # dcp.load with Python's reader: the fixture's data files under dcpp's .metadata.
        tmp = tempfile.mkdtemp()
        for f in os.listdir(os.path.join(fixtures, name)):
            if f.endswith('.distcp'):
                shutil.copy(os.path.join(fixtures, name, f), tmp)
        shutil.copy(os.path.join(root, name + '.metadata'), os.path.join(tmp, '.metadata'))
        sd = {}
        for k, v in ours.state_dict_metadata.items():
            if isinstance(v, TensorStorageMetadata):
                sd[k] = torch.zeros(v.size, dtype=v.properties.dtype)
        dcp.load(sd, checkpoint_id=tmp)
        ref = {k: torch.zeros_like(v) for k, v in sd.items()}
        shutil.copy(os.path.join(fixtures, name, '.metadata'), os.path.join(tmp, '.metadata'))
        dcp.load(ref, checkpoint_id=tmp)
        shutil.rmtree(tmp)
        check(all(torch.equal(sd[k], ref[k]) for k in sd) and any(sd[k].abs().sum() > 0 for k in sd),
              f'{name}: dcp.load through dcpp .metadata gives the same {len(sd)} tensors as through the original')

m = load_md(os.path.join(root, 'constructed.metadata'))
check(isinstance(m, Metadata), 'constructed.metadata: pickle.load gives Metadata')
w = m.state_dict_metadata['model.w']
check(isinstance(w, TensorStorageMetadata) and w.properties.dtype == torch.bfloat16 and w.properties.requires_grad
      and w.properties.memory_format == torch.channels_last and w.properties.pin_memory
      and w.properties.layout == torch.strided and w.size == torch.Size([8, 6])
      and [(c.offsets, c.sizes) for c in w.chunks] == [(torch.Size([0, 0]), torch.Size([4, 6])), (torch.Size([4, 0]), torch.Size([4, 6]))],
      'constructed: model.w properties, size and chunks')
s = m.state_dict_metadata['scalar']
check(s.properties.dtype == torch.complex32 and s.properties.layout == torch.sparse_coo
      and s.properties.memory_format == torch.preserve_format and s.size == torch.Size([]), 'constructed: scalar complex32 sparse_coo preserve_format')
check(isinstance(m.state_dict_metadata['optim.param_groups.0.lr'], BytesStorageMetadata), 'constructed: bytes item')
check(m.planner_data['optim.param_groups.0.lr'] == ('optim', 'param_groups', 0, 'lr'), 'constructed: planner path with int step')
check(m.planner_data['layers.1499.weight'] == ('layers', 1499, 'weight') and len(m.state_dict_metadata) == 1503, 'constructed: 1503 keys')
keys = list(m.storage_data)
info = m.storage_data[MetadataIndex('model.w', (4, 0))]
check(info.relative_path == '__1_0.distcp' and info.offset == 5000000000 and info.length == 1308
      and info.transform_descriptors == ['stream.zstd/1'], 'constructed: _StorageInfo with a 5 GB offset and transforms')
check(keys[1].index == 1 and keys[2].index is None and 'offset' not in keys[2].__dict__,
      'constructed: MetadataIndex index hint, bytes item without offset')
sm = m.storage_meta
check(str(sm.checkpoint_id) == '/tmp/ckpt/step-1' and sm.save_id == 'save-uuid' and sm.load_id is None and sm.modules == ['model'],
      'constructed: StorageMeta')
check(m.version == '1.0.0', 'constructed: version')
print('failures:', failures)
sys.exit(1 if failures else 0)
