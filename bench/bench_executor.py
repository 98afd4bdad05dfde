#!/usr/bin/python3
"""bench_executor.py - magpie's CPU executor against PyTorch's CPU forward, side by side.

For each model: export it to ONNX with random weights, run it in PyTorch (same thread count,
no_grad, after warm-up) and through `magpie run --repeat 3 --json` (its wall_seconds is the
median of 3 executions after a warm-up one, kernel execution only, as PyTorch's timing is),
alternating the two, and report the median of each and their ratio. The outputs are compared too, so a fast but wrong executor cannot pass unnoticed.

Usage: /usr/bin/python3 bench/bench_executor.py [--magpie build/magpie] [--threads 2] [--runs 7]
Needs Debian's python3-torch and python3-torchvision (not needed by the tests).
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time

# Both PyTorch and magpie use OpenMP; with the default wait policy the threads of one keep
# spinning for a while after a call and steal the cores from the other, which is measured next.
# Passive waiting makes the alternation fair. It must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch
import torchvision



class UNet(torch.nn.Module):
    """A standard U-Net (Ronneberger et al.) at width 32: conv-BN-ReLU pairs, max-pool down,
    transposed-conv up, skip concatenation."""

    def __init__(self, w=32, depth=4):
        super().__init__()
        def block(i, o):
            return torch.nn.Sequential(
                torch.nn.Conv2d(i, o, 3, padding=1), torch.nn.BatchNorm2d(o), torch.nn.ReLU(),
                torch.nn.Conv2d(o, o, 3, padding=1), torch.nn.BatchNorm2d(o), torch.nn.ReLU())
        ch = [w * 2 ** i for i in range(depth + 1)]
        self.down = torch.nn.ModuleList([block(3, ch[0])] + [block(ch[i], ch[i + 1]) for i in range(depth)])
        self.up = torch.nn.ModuleList([torch.nn.ConvTranspose2d(ch[i + 1], ch[i], 2, stride=2) for i in reversed(range(depth))])
        self.dec = torch.nn.ModuleList([block(2 * ch[i], ch[i]) for i in reversed(range(depth))])
        self.head = torch.nn.Conv2d(ch[0], 2, 1)

    def forward(self, x):
        skips = []
        for i, b in enumerate(self.down):
            x = b(x)
            if i < len(self.down) - 1:
                skips.append(x)
                x = torch.nn.functional.max_pool2d(x, 2)
        for up, dec in zip(self.up, self.dec):
            x = dec(torch.cat([up(x), skips.pop()], 1))
        return self.head(x)


def models():
    torch.manual_seed(0)
    enc = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True), 6)
    return [
        ("resnet18", torchvision.models.resnet18(weights=None), torch.randn(1, 3, 224, 224)),
        ("transformer_encoder", enc, torch.randn(1, 128, 512)),
        ("unet", UNet(), torch.randn(1, 3, 256, 256)),
    ]


def time_torch(model, x):
    with torch.no_grad():
        model(x)
        t = time.perf_counter()
        model(x)
        return time.perf_counter() - t


def time_magpie(magpie, onnx_path, npy_path, outdir):
    r = subprocess.run([magpie, "run", onnx_path, "-i", npy_path, "-o", outdir, "--json",
                        "--repeat", "3"],
                       check=True, capture_output=True, text=True)
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--magpie", default="build/magpie")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--only", nargs="*", help="model names to run (default: all)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    env_threads = str(a.threads)
    os.environ["OMP_NUM_THREADS"] = env_threads
    os.environ["OPENBLAS_NUM_THREADS"] = env_threads
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, model, x in models():
            if a.only and name not in a.only:
                continue
            model.eval()
            path = os.path.join(tmp, name + ".onnx")
            torch.onnx.export(model, x, path, opset_version=13, do_constant_folding=False)
            npy = os.path.join(tmp, name + ".npy")
            np.save(npy, x.numpy())
            with torch.no_grad():
                ref = model(x).numpy()
            tt, mt = [], []
            for _ in range(a.runs):  # alternate so that machine noise hits both alike
                tt.append(time_torch(model, x))
                res = time_magpie(a.magpie, path, npy, tmp)
                mt.append(res["wall_seconds"])
            out = np.load(res["outputs"][0]["file"])
            err = np.linalg.norm(out.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-12)
            t, m = statistics.median(tt), statistics.median(mt)
            rows.append((name, t, m, m / t, err, res["peak_bytes"]))
            print(f"{name:22s} torch {t*1e3:8.1f} ms  magpie {m*1e3:8.1f} ms  ratio {m/t:5.2f}  "
                  f"rel.err {err:.1e}  peak {res['peak_bytes']/2**20:.1f} MiB", flush=True)
    print("\n| model | PyTorch (ms) | magpie (ms) | magpie / PyTorch | rel. error |")
    print("|---|---|---|---|---|")
    for name, t, m, r, e, _ in rows:
        print(f"| {name} | {t*1e3:.1f} | {m*1e3:.1f} | {r:.2f} | {e:.1e} |")


if __name__ == "__main__":
    main()
