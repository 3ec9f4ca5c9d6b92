#!/usr/bin/env python3
"""Turn a GPU sweep of validation/microbench/gpu_sweep.py into rows of the fitted tables.

    python3 tools/import_gpu_sweep.py validation/microbench/h200-2026-11-28

The directory holds one sub-directory per run of the sweep (run1, run2, ...), each with
gemm_raw.csv, attention_raw.csv, memory_raw.csv and misc.json. A row of the tables is the mean of
the runs' medians for one configuration (the runs' spread is printed); rows from an earlier import
of the same directory are replaced, every other row is kept as it is. Written with the csv
module's CRLF line ends, as the tables are.

What goes in (validation/microbench/README.md says why):
  gemm.csv          bf16 (torch.mm) and FP8 (torch._scaled_mm, without and with fast
                    accumulation: the library column says which) rows, marked as a steady-state
                    sweep: the sweep runs under the power cap after a warm-up (smi.csv of the run
                    shows the clocks)
  attention.csv     the flash backend as flash2, the cuDNN backend as cudnn; forward and backward
  memory_bound.csv  the single-kernel rows in meshsim's kernel classes: RMSNorm and LayerNorm
                    forward (PyTorch's fused kernels), the plain FP8 cast, copy and triad; the
                    eager multi-kernel compositions stay in the raw tables
"""
import csv
import io
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, 'validation', 'microbench')


def runs(directory):
    out = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isfile(os.path.join(path, 'misc.json')):
            out.append(path)
    if not out:
        raise SystemExit(f'{directory}: no run directories (run*/misc.json)')
    return out


def merged(paths, table, key):
    """{key: (first row, [value of each run])} over the runs' raw tables."""
    rows = {}
    for p in paths:
        for r in csv.DictReader(open(os.path.join(p, table))):
            k = key(r)
            if k in rows:
                rows[k][1].append(r)
            else:
                rows[k] = (r, [r])
    return rows


def mean_of(rs, field):
    return statistics.mean(float(r[field]) for r in rs)


def spread(rs, field):
    v = [float(r[field]) for r in rs]
    return (max(v) - min(v)) / statistics.mean(v) if len(v) > 1 else 0.0


def replace_rows(table, source_tag, new_rows):
    """Drops the table's lines that carry source_tag and appends new_rows (CRLF, as the csv
    module writes). Every other line is kept byte for byte: some tables mix line ends."""
    path = os.path.join(MB, table)
    with open(path, 'rb') as f:
        lines = f.read().splitlines(keepends=True)
    fields = next(csv.reader([lines[0].decode()]))
    kept = [ln for ln in lines if source_tag.encode() not in ln]
    if not kept[-1].endswith(b'\n'):
        kept[-1] += b'\r\n'
    text = io.StringIO()
    csv.DictWriter(text, fieldnames=fields).writerows(new_rows)
    with open(path, 'wb') as f:
        f.write(b''.join(kept) + text.getvalue().encode())
    print(f'{table}: {len(kept) - 1} rows kept, {len(new_rows)} from {source_tag}')


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    directory = os.path.normpath(sys.argv[1])
    rel = os.path.relpath(os.path.abspath(directory), ROOT)
    paths = runs(directory)
    env = json.load(open(os.path.join(paths[0], 'misc.json')))['env']
    chip = env['chip']
    tag = f'{rel}/'
    versions = (f"{env['device']}, driver {env['nvidia_smi'].split(', ')[1]}, PyTorch {env['torch']}, "
                f"CUDA {env['cuda']}, cuDNN {env['cudnn']}")
    source = (f'this project, measured on the lent {env["device"]} {env["date_utc"][:10]} '
              f'({versions}): {tag}run*/{{}} by validation/microbench/gpu_sweep.py')
    nruns = len(paths)

    gemm = merged(paths, 'gemm_raw.csv', lambda r: (r['dtype'], r['role'], r['m'], r['n'], r['k']))
    out, worst = [], 0.0
    libraries = {'bf16': 'cuBLAS via torch.mm',
                 'fp8': 'cuBLASLt via torch._scaled_mm (e4m3, no fast accumulation)',
                 'fp8-fast-accum': 'cuBLASLt via torch._scaled_mm (e4m3, fast accumulation)'}
    for (dtype, role, m, n, k), (first, rs) in gemm.items():
        worst = max(worst, spread(rs, 'tflops'))
        out.append({'chip': chip, 'dtype': 'fp8' if dtype.startswith('fp8') else dtype,
                    'library': libraries[dtype] + f' [{role}]',
                    'm': m, 'n': n, 'k': k, 'batch': 1,
                    'tflops': round(mean_of(rs, 'tflops'), 1),
                    'statistic': f'steady state under the power cap: mean of {nruns} runs, each the '
                                 'median of CUDA-event-timed calls after warm-up, random data',
                    'source': source.format('gemm_raw.csv')})
    print(f'gemm: {len(out)} rows, largest run-to-run spread {worst:.1%}')
    replace_rows('gemm.csv', tag, out)

    attn = merged(paths, 'attention_raw.csv',
                  lambda r: (r['impl'], r['pass'], r['causal'], r['batch'], r['heads_q'],
                             r['heads_kv'], r['head_dim'], r['seq']))
    out, worst = [], 0.0
    names = {'flash': ('flash2', f"PyTorch {env['torch']} SDPA flash (FA2)"),
             'cudnn': ('cudnn', f"cuDNN {env['cudnn']} via PyTorch {env['torch']} SDPA")}
    for key, (first, rs) in attn.items():
        impl, kernel = names[key[0]]
        worst = max(worst, spread(rs, 'tflops'))
        out.append({'chip': chip, 'impl': impl, 'kernel': kernel, 'dtype': 'bf16',
                    'pass': first['pass'], 'causal': first['causal'], 'batch': first['batch'],
                    'heads_q': first['heads_q'], 'heads_kv': first['heads_kv'],
                    'head_dim': first['head_dim'], 'seq': first['seq'],
                    'tflops': round(mean_of(rs, 'tflops'), 1), 'flop_convention': 'FA',
                    'source': source.format('attention_raw.csv')})
    print(f'attention: {len(out)} rows, largest run-to-run spread {worst:.1%}')
    replace_rows('attention.csv', tag, out)

    mem = merged(paths, 'memory_raw.csv', lambda r: (r['op'], r['pass'], r['rows'], r['width']))
    ops = {('rms_norm', 'fwd'): ('rms_norm', 'torch.nn.functional.rms_norm', '2 x x x elem_bytes'),
           ('layer_norm', 'fwd'): ('layer_norm', 'torch.nn.functional.layer_norm',
                                   '2 x x x elem_bytes'),
           ('fp8_cast', 'fwd'): ('fp8_cast', 'Tensor.to(float8_e4m3fn)',
                                 'read bf16, write fp8'),
           ('copy', 'fwd'): ('stream_copy', 'Tensor.copy_', 'read + write'),
           ('triad', 'fwd'): ('stream_triad', 'torch.add(b, c, alpha)', '2 reads + 1 write')}
    out = []
    for (op, ps, rows, width), (first, rs) in mem.items():
        if (op, ps) not in ops:
            continue
        name, kernel, model = ops[(op, ps)]
        t = mean_of(rs, 'time_us')
        nbytes = int(first['min_bytes'])
        out.append({'chip': chip, 'op': name, 'kernel': kernel,
                    'provider': 'torch-fused' if name in ('rms_norm', 'layer_norm') else 'torch',
                    'dtype': 'bf16', 'pass': 'forward', 'rows': rows, 'width': width,
                    'source_bytes': nbytes, 'bytes_model': model, 'time_us': round(t, 3),
                    'gbps': round(nbytes / (t * 1e-6) / 1e9, 1),
                    'source': source.format('memory_raw.csv')})
    print(f'memory_bound: {len(out)} rows')
    replace_rows('memory_bound.csv', tag, out)


if __name__ == '__main__':
    main()
