#!/usr/bin/env python3
"""Fit meshsim's per-kernel-class cost model to the committed component measurements.

Reads validation/microbench/{gemm,attention,memory_bound}.csv and the chips' peaks from
topology/chips.json, and prints, per chip, the parameters that minimise the squared relative
error of the model against the tables, with the median and largest error per table. The
parameters go into topology/chips.json by hand, each with this fit named as its source; the C++
test tests/topology/kernel_fit_test.cc recomputes the errors with meshsim's own model and holds
them to a tolerance per chip.

The model (topology/include/meshsim/topology/compute_model.h is the reference):
  GEMM       t = max(F / (peak(dtype) * e), bytes / (HBM * e_mem)) + launch
             e = e_max(dtype) * f, f = q * k_s / (k_s + k_half); q the tile/wave quantization
             and k_s the reduction per split-K slice, for the best of the chip's tiles and
             splits. f and the memory term are not computed here: `meshsim kernel-model`
             evaluates meshsim's own gemm_tiling and roofline on every row, f once per k_half of
             the grid (--meshsim names the binary, default build/meshsim), so the fit and the
             simulator cannot drift apart (--check-model, a CTest test, holds them equal).
  attention  t = F / (peak * e) + launch, e = e_inf * s / (s + s_half) per (implementation, pass,
             causal mask, head dim)
  memory     t = bytes / (HBM * e_class) + launch, bytes as meshsim's kernels count them
Grid search, deterministic; no randomness. Usage: tools/fit_kernels.py [--family hopper]
[--meshsim build/meshsim]; --check-model only checks that the fit costs every GEMM row as meshsim
does (a CTest test).
"""
import argparse
import csv
import json
import math
import os
import re
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = os.path.join(ROOT, 'validation', 'microbench')

UNITS = {'k': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12, 'P': 1e15}


def rate(text):
    m = re.match(r'([0-9.eE+-]+)\s*([kMGTP]?)(FLOP/s|B/s)', text.replace('TFLOP/s', 'TFLOP/s'))
    if not m:
        raise ValueError(text)
    return float(m.group(1)) * UNITS.get(m.group(2), 1)


def merge_patch(base, patch):
    """RFC 7386, as the catalogue reads a chip that is a variant_of another."""
    if not isinstance(patch, dict):
        return patch
    out = dict(base) if isinstance(base, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def chips():
    cat = json.load(open(os.path.join(ROOT, 'topology', 'chips.json')))['chips']
    out = {}
    for name, c in cat.items():
        if 'variant_of' in c:
            c = merge_patch(cat[c['variant_of']['chip']], c)
        peaks = {d: rate(v['value']) for d, v in c['peak'].items()}
        hbm = rate(c['hbm']['bandwidth']['value'])
        units = c['gpu']['sm_count']['value'] if 'gpu' in c else c['tpu']['mxu_count']['value']
        out[name] = {'peak': peaks, 'hbm': hbm, 'units': units, 'kind': c['kind']}
    return out


def rows(name):
    return list(csv.DictReader(open(os.path.join(MB, name))))


MESHSIM = os.path.join(ROOT, 'build', 'meshsim')


def gemm_key(r):
    return (r['chip'], r['dtype'], int(r['m']), int(r['n']), int(r['k']), int(r['batch'] or 1))


class KernelModel:
    """meshsim's own GEMM cost (`meshsim kernel-model`) of every row of gemm.csv: one call per
    k_half, so the tiling, the split-K rule, the chips' tiles and the memory term are the
    simulator's."""

    def __init__(self):
        self.by_k_half = {}
        self.meshsim = MESHSIM

    def run(self, shapes, *flags):
        """kernel-model's rows for `shapes`, (chip, dtype, m, n, k, batch) tuples, in order."""
        text = 'chip,dtype,m,n,k,batch\n' + ''.join(','.join(map(str, s)) + '\n' for s in shapes)
        out = subprocess.run([self.meshsim, 'kernel-model', '-', *flags], input=text,
                             capture_output=True, text=True, check=True).stdout
        return list(csv.DictReader(out.splitlines()))

    def row(self, r, k_half):
        if k_half not in self.by_k_half:
            shapes = sorted({gemm_key(x) for x in rows('gemm.csv')})
            self.by_k_half[k_half] = dict(zip(shapes, self.run(shapes, '--k-half', str(k_half))))
        return self.by_k_half[k_half][gemm_key(r)]

    def tile_factor(self, r, k_half):
        """f = q * k_s / (k_s + k_half) of the row's shape on its chip."""
        return float(self.row(r, k_half)['tile_factor'])

    def memory_time(self, r):
        """The GEMM's memory-bound time (its bytes over the chip's HBM or cache at the
        catalogue's efficiency), which k_half does not change."""
        return float(self.row(r, 0)['memory_bound_s'])


model = KernelModel()


def gemm_time(r, chip, e_max, k_half, launch):
    m, n, k, b = int(r['m']), int(r['n']), int(r['k']), int(r['batch'] or 1)
    dt = r['dtype']
    peak = chip['peak']['fp16' if dt == 'fp16' else dt]
    e = e_max * model.tile_factor(r, k_half)
    flops = 2.0 * m * n * k * b
    return max(flops / (peak * e), model.memory_time(r)) + launch


def gemm_error(r, chip, e, k_half, launch):
    flops = 2.0 * int(r['m']) * int(r['n']) * int(r['k']) * int(r['batch'] or 1)
    measured = flops / (float(r['tflops']) * 1e12)
    return gemm_time(r, chip, e, k_half, launch) / measured - 1


def group_of(r):
    return 'fp8' if r['dtype'] == 'fp8' else '16'


# Rows the model is not meant for: GEMMs of fewer than this many rows are the small-batch
# (inference) regime, where the library's split-K and small-tile kernels take over.
MIN_ROWS = 256


def fast_accumulation(r):
    """An FP8 row timed with cuBLASLt's fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM: the
    tensor cores' partial sums are not promoted to full FP32 at intervals), which Transformer
    Engine's recipes use for forward GEMMs and torchao's float8 for its output GEMM."""
    return r['dtype'] == 'fp8' and '(e4m3, fast accumulation)' in r['library']


def gemm_rows(name):
    """The chip's GEMM rows of at least MIN_ROWS rows, without the fast-accumulation ones (the
    e_max fits are of the default accumulation; fast_accumulation_gain measures those)."""
    return [r for r in rows('gemm.csv') if r['chip'] == name and int(r['m']) >= MIN_ROWS
            and not fast_accumulation(r)]


def fast_accumulation_gain(names):
    """The median ratio of FP8 TFLOP/s with and without fast accumulation over the layer shapes
    measured both ways (the same run, shape and power state), with the pairs; None without."""
    def key(r):  # the shape and its role tag, e.g. "llama3-8b.qkv.fwd]"
        return r['m'], r['n'], r['k'], r['library'].split('[')[-1]

    ratios = []
    for n in names:
        fp8 = [r for r in rows('gemm.csv')
               if r['chip'] == n and r['dtype'] == 'fp8' and layer_shape_row(r)]
        plain = {key(r): float(r['tflops']) for r in fp8 if not fast_accumulation(r)}
        ratios += [float(r['tflops']) / plain[key(r)] for r in fp8
                   if fast_accumulation(r) and key(r) in plain]
    if not ratios:
        return None
    return statistics.median(ratios), ratios


# The training regime: GEMMs whose M, N and K are all at least this (tokens x hidden sizes of the
# transformer layers). Where a family has steady-state sweep rows there (steady_state_sweep), a
# dtype group's e_max is fitted to those rows alone (fit_training_regime): over all rows, the ramp
# of small shapes (where cuBLASLt's stream-K kernels beat the one-tile-per-SM wave model) and the
# MAMF best-of-sweep maxima pull e_max up, and the model then ran the large GEMMs faster than the
# same sweeps measured them (FP8 on Hopper 9-13%, 16-bit on A100 4-9%).
TRAINING_MIN_DIM = 4096


def steady_state_sweep(r):
    """Azure's superbench cuBLASLt sweeps: random data after 10,000 warm-up iterations (the A100,
    H100 and H200 results files say so), so clocks have settled where a training run's do; and
    this project's H200 sweep (validation/microbench/gpu_sweep.py), run under the power cap after
    a warm-up (its smi.csv shows 1365-1590 MHz at 690 W). The single products and best-of-sweep
    maxima are short runs."""
    return r['library'] == 'cuBLASLt' or r['statistic'].startswith('steady state')


def layer_shape_row(r):
    """A steady-state sweep row of a transformer layer's GEMM (a projection or MLP shape of a
    model in workloads/models/, forward or backward: validation/microbench/gpu_sweep.py tags its
    role, e.g. [llama3-8b.qkv.fwd]; cubes are not layer shapes). Where a family has such rows,
    its k_half is chosen on them: they are the shapes a training step runs, while the small
    cubes of the other rows, where cuBLAS's stream-K kernels beat the one-tile-per-SM wave
    model, would pull it to 0 and run the layers of short K (the o projection at TP 8, K 1024)
    15-22% faster than measured."""
    return steady_state_sweep(r) and '[' in r['library'] and '[cube]' not in r['library']


def best_of_sweep(r):
    return r['statistic'].startswith('best shape of a brute-force sweep')


E_MAX_GRID = [x / 1000 for x in range(500, 1001, 2)]


def best_e_max(fitted, ceilings, error):
    """The e_max of the grid with the least squared error of `error(chip, row, e)` over `fitted`
    among those that run no row of `ceilings` (best-of-sweep maxima: MAMF) faster than measured;
    (squared error, e_max, errors, fitted), or None when every e_max breaks a ceiling."""
    best = None
    for e in E_MAX_GRID:
        if any(error(n, r, e) < 0 for n, r in ceilings):
            continue  # faster than a measured maximum: not achievable
        errs = [error(n, r, e) for n, r in fitted]
        sq = sum(x * x for x in errs)
        if best is None or sq < best[0]:
            best = (sq, e, errs, fitted)
    return best


def fit_training_regime(names, cat, launch, k_half, group):
    """e_max of a dtype group ('16' or 'fp8') at the family's k_half over the training-regime rows
    of its steady-state sweeps; the best-of-sweep maxima (MAMF) are a ceiling: the model must not
    exceed them at their shapes. None when the family has no such rows in that group."""
    sub = [(n, r) for n in names for r in gemm_rows(n)
           if group_of(r) == group and steady_state_sweep(r)
           and min(int(r['m']), int(r['n']), int(r['k'])) >= TRAINING_MIN_DIM]
    ceilings = [(n, r) for n in names for r in gemm_rows(n)
                if group_of(r) == group and best_of_sweep(r)]
    if not sub:
        return None
    return best_e_max(sub, ceilings,
                      lambda n, r, e: gemm_error(r, cat[n], e, k_half, launch))


K_HALF_GRID = [0, 64, 128, 192, 256, 320, 384, 448, 512, 640, 768]
# Families with too few rows to fit k_half would be pinned here (family names -> k_half grid). TPU
# v6e's three device-timed products (4096^3 and 8192^3) fit their own: the 4096^3 is no slower than
# the 8192^3, so k_half 0.
PINNED_K_HALF = {}


def fit_gemm_family(names, cat, launch, pooled):
    """One k_half for the family (a property of the SM and the library's tiles); one e_max per
    dtype group (16-bit, fp8), per chip or, with `pooled`, for the family's chips together (the
    same die, clocks and library: H100 and H200). A best-of-sweep maximum (MAMF) is a ceiling:
    no e_max that runs its shape faster than measured is considered."""
    data = {n: gemm_rows(n) for n in names}
    keys = sorted({(None if pooled else n, group_of(r)) for n in names for r in data[n]},
                  key=str)
    # k_half is scored on the layer shapes of a steady-state sweep where the family has them
    # (layer_shape_row), else on all its rows.
    by_layers = any(layer_shape_row(r) for n in names for r in data[n])
    best = None
    for k_half in PINNED_K_HALF.get(tuple(names), K_HALF_GRID):
        def error(n, r, e):
            return gemm_error(r, cat[n], e, k_half, launch)
        total = 0
        fits = {}
        for key in keys:
            sub = [(n, r) for n in names for r in data[n]
                   if (key[0] in (None, n)) and group_of(r) == key[1]]
            fits[key] = best_e_max(sub, [(n, r) for n, r in sub if best_of_sweep(r)], error)
            scored = [(n, r) for n, r in sub if layer_shape_row(r)] if by_layers else sub
            if scored is sub:
                total += fits[key][0]
            elif scored:
                total += best_e_max(scored, [], error)[0]
        if best is None or total < best[0]:
            best = (total, k_half, fits)
    return best[1], best[2]


def attention_flops(r):
    b, h, d, s = int(r['batch']), int(r['heads_q']), int(r['head_dim']), int(r['seq'])
    fwd = 4.0 * b * h * s * s * d / (2 if r['causal'] == 'true' else 1)
    return {'fwd': fwd, 'bwd': 2.5 * fwd, 'fwd+bwd': 3.5 * fwd}[r['pass']]


# Implementations attention.csv keeps for reference that meshsim does not model (no run it
# simulates uses them): not fitted. openai-triton: the "FlashAttention Triton" series of the
# FlashAttention-2 paper's A100 figure, OpenAI's triton.ops.flash_attention, not the
# flash_attn_triton.py port that meshsim's `triton` is (validation/microbench/README.md).
UNMODELLED_ATTENTION = {'openai-triton'}


# Implementations whose causal kernels skip the key blocks above the diagonal at a fixed block
# size: with n = s / block blocks a side they compute n (n + 1) / 2 blocks of the n^2 that the
# causal FLOP count halves, so their efficiency against that count is e_inf * s / (s + block)
# exactly: s_half is the block, not a fitted parameter. splash: the TPU rows of attention.csv run
# JAX's Pallas flash attention with 512-token blocks (axlearn's benchmark, block_size 4 * 128,
# and MaxText's default sa_block sizes), all at one length (2048), which could not fit s_half.
BLOCK_S_HALF = {'splash': 512}


def s_half_grid(impl, causal):
    if causal == 'true' and impl in BLOCK_S_HALF:
        return [BLOCK_S_HALF[impl]]
    return range(0, 6001, 25)


def attention_rows(name):
    return [r for r in rows('attention.csv')
            if r['chip'] == name and r['impl'] not in UNMODELLED_ATTENTION]


def fit_attention(name, chip, launch):
    """Per (implementation, pass, causal, head dim): (e_inf, s_half) and the errors. Returns
    {key: (e_inf, s_half, errors)}."""
    data = attention_rows(name)
    keys = sorted({(r['impl'], r['pass'], r['causal'], int(r['head_dim'])) for r in data})
    peak = chip['peak']['bf16']
    out = {}
    for key in keys:
        sub = [r for r in data if (r['impl'], r['pass'], r['causal'], int(r['head_dim'])) == key]
        best = None
        for e in [x / 1000 for x in range(50, 1000, 2)]:
            for sh in s_half_grid(key[0], key[2]):
                errs = []
                for r in sub:
                    s = int(r['seq'])
                    f = attention_flops(r)
                    t = f / (peak * e * s / (s + sh)) + launch
                    errs.append(t / (f / (float(r['tflops']) * 1e12)) - 1)
                ss = sum(x * x for x in errs)
                if best is None or ss < best[0]:
                    best = (ss, e, sh, errs)
        out[key] = (best[1], best[2], best[3])
    return out


def backward_from_combined(combined, f_fwd, peak, impl):
    """(e_inf, s_half) of a backward series the source did not time alone: each forward+backward
    row's time less the fitted forward's (f_fwd: its (e_inf, s_half)), fitted again."""
    pts = []
    for r in combined:
        s = int(r['seq'])
        fwd = attention_flops(dict(r, **{'pass': 'fwd'}))
        total = 3.5 * fwd / (float(r['tflops']) * 1e12)
        t_fwd = fwd / (peak * f_fwd[0] * s / (s + f_fwd[1]))
        pts.append((s, 2.5 * fwd / ((total - t_fwd) * peak)))
    best = None
    for ee in [x / 1000 for x in range(50, 1000, 2)]:
        for shh in s_half_grid(impl, combined[0]['causal']):
            sq = sum((ee * s / (s + shh) / y - 1) ** 2 for s, y in pts)
            if best is None or sq < best[0]:
                best = (sq, ee, shh)
    return best[1], best[2]


def derive_backward(name, chip, fits):
    """Backward series the sources did not measure. Causal (the FA3 paper's figure 6 is
    non-causal): where the implementation has a measured forward+backward causal series, the
    backward is that series' time less the fitted causal forward's, fitted again. Otherwise the
    non-causal backward scaled as the forward is: e_inf by the causal / non-causal forward ratio,
    s_half shifted by the forward's shift (the causal mask's diagonal blocks cost about the same
    extra key length either way; the FlashAttention-2 rows, which have both, bear this out:
    (0.308, 550) by the rule against (0.332, 600) from the data at d 128). And any series timed
    forward and forward+backward but not backward alone (TPU: jax.grad times both): the combined
    time less the fitted forward's. Returns {key: (e_inf, s_half, how)}."""
    out = {}
    peak = chip['peak']['bf16']
    data = attention_rows(name)

    def rows_of(key):
        return [r for r in data if (r['impl'], r['pass'], r['causal'], int(r['head_dim'])) == key]

    for (impl, ps, causal, d), (e, sh, _) in fits.items():
        if ps != 'bwd' or causal != 'false' or (impl, 'bwd', 'true', d) in fits:
            continue
        f_nc = fits.get((impl, 'fwd', 'false', d))
        f_c = fits.get((impl, 'fwd', 'true', d))
        if not (f_nc and f_c):
            continue
        both = rows_of((impl, 'fwd+bwd', 'true', d))
        if both:
            out[(impl, 'bwd', 'true', d)] = (*backward_from_combined(both, f_c, peak, impl),
                                             'derived: the forward+backward causal series less '
                                             'the fitted causal forward')
        else:
            out[(impl, 'bwd', 'true', d)] = (round(e * f_c[0] / f_nc[0], 3),
                                             sh + f_c[1] - f_nc[1],
                                             'derived: non-causal backward, e_inf scaled and '
                                             's_half shifted as the causal forward is')
    for (impl, ps, causal, d) in [k for k in fits if k[1] == 'fwd+bwd']:
        bwd_key = (impl, 'bwd', causal, d)
        f_fwd = fits.get((impl, 'fwd', causal, d))
        if bwd_key in fits or bwd_key in out or not f_fwd:
            continue
        out[bwd_key] = (*backward_from_combined(rows_of((impl, ps, causal, d)), f_fwd, peak, impl),
                        'derived: the forward+backward series less the fitted forward')
    return out


def print_attention(name, chip, launch):
    fits = fit_attention(name, chip, launch)
    for key, (e, sh, errs) in fits.items():
        print(f'  {name} attention {key[0]:7s} {key[1]:8s} causal={key[2]:5s} d={key[3]:3d}: '
              f'e_inf={e:.3f} s_half={sh:5d} {summary(errs)}')
    for key, (e, sh, how) in derive_backward(name, chip, fits).items():
        print(f'  {name} attention {key[0]:7s} {key[1]:8s} causal={key[2]:5s} d={key[3]:3d}: '
              f'e_inf={e:.3f} s_half={sh:5d} {how}')


# meshsim's bytes for each kernel of memory_bound.csv (workloads/src/layer_ops.cc), per element
# width `e` of the row's dtype: one entry per kernel the row's implementation runs.
def meshsim_kernels(r):
    t, w = int(r['rows']), int(r['width'])
    e = {'bf16': 2, 'fp16': 2, 'fp32': 4}.get(r['dtype'], 2)
    op = r['op']
    if op in ('rms_norm', 'layer_norm'):
        return [2 * e * t * w + e * w]
    if op == 'swiglu':
        return [3 * e * t * (w // 2)]
    if op in ('relu_squared', 'rope'):
        return [2 * e * t * w]
    if op == 'cross_entropy' and r['provider'] == 'megatron-fused':
        # Megatron-Core's fused loss, forward (FusedCrossEntropy::kMegatronCore): the fp32 copy
        # and max, the in-place subtraction, exponent and sum, the in-place division.
        return [(e + 4) * t * w, 8 * t * w, 8 * t * w]
    if op == 'cross_entropy':
        return [2 * e * t * w]  # one pass: read the logits, write their gradient
    if op == 'fp8_cast':
        return [3 * t * w]  # read bf16, write fp8
    raise ValueError(op)


FUSED = {'liger', 'cudnn', 'megatron-fused', 'torch-fused'}
CLASS = {'rms_norm': 'norm', 'layer_norm': 'norm', 'swiglu': 'elementwise',
         'relu_squared': 'elementwise', 'rope': 'elementwise', 'cross_entropy': 'loss',
         'fp8_cast': 'quantize'}


def class_of(r):
    """meshsim's op class of a row's kernels: Megatron-Core's fused loss is element-wise and
    reduction kernels (layer_ops.cc costs them so), the one-pass losses the loss class."""
    if r['op'] == 'cross_entropy' and r['provider'] == 'megatron-fused':
        return 'elementwise'
    return CLASS[r['op']]


FAMILIES = {
    'ampere': ['a100-80gb'],
    'hopper': ['h100-sxm', 'h200'],
    'blackwell': ['b200', 'gb200'],
    'tpu': ['tpu-v5e', 'tpu-v5p'],
    'tpu-v6e': ['tpu-v6e'],
}
POOLED = {'hopper'}


def fit_launch(names, cat):
    """The per-kernel fixed cost of a family, from its chips' memory-bound tables."""
    best = None
    for launch in [x * 0.5e-6 for x in range(0, 17)]:
        total = 0
        for n in names:
            r = fit_memory_at(n, cat[n], launch)
            total += sum(v[0] for v in r.values()) if r else 0
        if best is None or total < best[0]:
            best = (total, launch)
    return best[1]


def fit_memory_at(name, chip, launch):
    data = [r for r in rows('memory_bound.csv') if r['chip'] == name]
    fused = [r for r in data if r['op'] in CLASS and
             (r['provider'] in FUSED or r['op'] == 'fp8_cast') and r['time_us']]
    out = {}
    for c in sorted({class_of(r) for r in fused}):
        sub = [r for r in fused if class_of(r) == c]
        cand = None
        for e in [x / 1000 for x in range(50, 1001, 5)]:
            errs = [sum(b / (chip['hbm'] * e) + launch for b in meshsim_kernels(r)) /
                    (float(r['time_us']) * 1e-6) - 1 for r in sub]
            sq = sum(x * x for x in errs)
            if cand is None or sq < cand[0]:
                cand = (sq, e, errs)
        out[c] = cand
    return out


def summary(errs):
    a = sorted(abs(x) for x in errs)
    return f'n={len(a)} median|err|={statistics.median(a):.3f} max|err|={a[-1]:.3f}'


def check_model(cat):
    """Whether the fit's objective is the simulator's cost: for every GEMM row of gemm.csv (but
    the fast-accumulation ones, which the fit leaves out), gemm_time at the catalogue's e_max and
    k_half against `meshsim kernel-model`'s time for the shape. Returns the rows that differ."""
    raw = json.load(open(os.path.join(ROOT, 'topology', 'chips.json')))['chips']

    def value(x):
        return x['value'] if isinstance(x, dict) else x

    checked = [r for r in rows('gemm.csv') if r['chip'] in cat and not fast_accumulation(r)]
    meshsim = model.run([gemm_key(r) for r in checked])
    bad = []
    for r, c in zip(checked, meshsim):
        chip = raw[r['chip']]
        if 'variant_of' in chip:
            chip = merge_patch(raw[chip['variant_of']['chip']], chip)
        e = chip['efficiency']
        e_max = value(e.get('matmul_fp8', e['matmul'])) if r['dtype'] == 'fp8' else value(e['matmul'])
        k_half = value(e['matmul_shape']['k_half']) if 'matmul_shape' in e else 0
        t = gemm_time(r, cat[r['chip']], e_max, k_half, float(c['overhead_s']))
        if abs(t / float(c['time_s']) - 1) > 1e-6:
            bad.append((r, t, float(c['time_s'])))
    return checked, bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--family')
    ap.add_argument('--check-model', action='store_true',
                    help='only check that the fit costs every GEMM row as meshsim does; exit 1 if not')
    ap.add_argument('--meshsim', default=MESHSIM, help='the meshsim binary (kernel-model)')
    args = ap.parse_args()
    model.meshsim = args.meshsim
    cat = chips()
    if args.check_model:
        checked, bad = check_model(cat)
        for r, t, want in bad:
            print(f"{r['chip']} {r['dtype']} {r['m']}x{r['n']}x{r['k']}: the fit costs "
                  f"{t:.6g} s, meshsim {want:.6g} s")
        print(f'{len(checked)} GEMM rows of gemm.csv: {len(bad)} costed otherwise than by meshsim')
        raise SystemExit(1 if bad or not checked else 0)
    for fam, names in FAMILIES.items():
        if args.family and fam != args.family:
            continue
        launch = fit_launch(names, cat) if not fam.startswith('tpu') else 0.0
        print(f'== {fam}: launch {launch * 1e6:.1f} us')
        for n in names:
            data = [r for r in rows('memory_bound.csv') if r['chip'] == n]
            stream = {r['op']: float(r['gbps']) * 1e9 / cat[n]['hbm'] for r in data
                      if r['op'].startswith('stream_')}
            if stream:
                print(f'  {n} STREAM copy {stream.get("stream_copy", 0):.3f} triad '
                      f'{stream.get("stream_triad", 0):.3f} of HBM')
            for c, (_, e, errs) in fit_memory_at(n, cat[n], launch).items():
                print(f'  {n} memory {c:12s} e={e:.3f} {summary(errs)}')
        k_half, fits = fit_gemm_family(names, cat, launch, fam in POOLED)
        print(f'  gemm k_half={k_half}')
        for (n, g), (_, e, errs, sub) in fits.items():
            print(f'  {n or fam} gemm {g:4s} e_max={e:.3f} {summary(errs)}')
            for (chip, r), x in zip(sub, errs):
                print(f'      {chip:9s} {r["dtype"]:5s} {r["m"]:>6s}x{r["n"]:>6s}x{r["k"]:>6s} '
                      f'{float(r["tflops"]):8.1f} TFLOP/s err {x:+.3f}  ({r["library"][:30]})')
        for group, label in (('16', '16-bit'), ('fp8', 'FP8')):
            fit = fit_training_regime(names, cat, launch, k_half, group)
            if fit is not None:
                sweeps = ', '.join(sorted({n for n, _ in fit[3]}))
                print(f'  {fam} gemm {group} training regime (steady-state sweep rows of {sweeps} '
                      f'with M, N, K >= {TRAINING_MIN_DIM}): e_max={fit[1]:.3f} '
                      f'{summary(fit[2])}; the {label} e_max of {", ".join(names)}')
        gain = fast_accumulation_gain(names)
        if gain is not None:
            print(f'  {fam} gemm fp8 fast accumulation: median speedup {gain[0]:.3f} over '
                  f'{len(gain[1])} layer shapes (range {min(gain[1]):.3f}-{max(gain[1]):.3f}): '
                  f'the matmul_fp8_fast_accum_speedup of {", ".join(names)}')
        for n in names:
            print_attention(n, cat[n], launch)


if __name__ == '__main__':
    main()
