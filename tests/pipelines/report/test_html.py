import re
import subprocess
import sys

import numpy as np
from matplotlib import image

from pipelines.report.html import write_report
from tests.support.browser import render


def test_report_renders_in_a_real_browser(small_job, tmp_path):
    index = write_report(small_job.out_dir)
    assert index == small_job.out_dir / "report" / "index.html"
    pngs = sorted(p.name for p in index.parent.glob("*.png"))
    assert {"stages.png", "lengths.png", "mixture.png"} <= set(pngs)
    html = index.read_text()
    for stage in small_job.stages[1:]:
        assert stage in html  # the per-stage table
    shot = tmp_path / "page.png"
    dom = render(index.as_uri(), tmp_path / "profile", shot)
    n = int(re.search(r'data-images="(\d+)"', dom).group(1))
    ok = int(re.search(r'data-images-rendered="(\d+)"', dom).group(1))
    assert n == len(pngs) and ok == n  # every plot decoded and laid out
    pixels = image.imread(shot)
    assert pixels.shape[0] > 500 and np.std(pixels[..., :3]) > 0.05  # not a blank page
    for png in pngs:
        img = image.imread(index.parent / png)
        assert img.shape[0] > 100 and np.std(img[..., :3]) > 0.01


def test_report_cli_errors(tmp_path):
    run = subprocess.run([sys.executable, "-m", "pipelines", "report", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 2 and "no documents/ or rejects/" in run.stderr and "Traceback" not in run.stderr
