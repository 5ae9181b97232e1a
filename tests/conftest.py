import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    # Triton kernels are checked on the CPU by Triton's interpreter; the flag must be set before
    # triton.jit decorates them, i.e. before any test module imports rooflab.kernels.
    os.environ.setdefault("TRITON_INTERPRET", "1")
# the tests' own ceilings cache, whatever ROOFLAB_CACHE says: ceilings measured while tests (and
# their workers) share the device are measured under load, never for a later run to trust
os.environ["ROOFLAB_CACHE"] = os.path.join(os.path.dirname(__file__), ".cache")


def pytest_collection_modifyitems(config, items):
    for item in items:  # a test taking the device fixture runs on the GPU where there is one
        if "device" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.on_device)
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device():
    return "cuda" if HAS_CUDA else "cpu"


@pytest.fixture
def browser(tmp_path):
    """Headless Debian chromium through selenium (skips where either is missing)."""
    import shutil
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = shutil.which("chromedriver")
    if not (chrome and driver_bin):
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1280,2000",
                 f"--user-data-dir={tmp_path / 'profile'}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(driver_bin), options=opts)
    yield drv
    drv.quit()


@pytest.fixture(scope="session")
def cpu_report(tmp_path_factory):
    """`rooflab lab` on the CPU, quick, once a session: (its folder, its results)."""
    from rooflab.lab import run as LR

    out = tmp_path_factory.mktemp("report")
    res = LR.run_lab("cpu", quick=True, out_dir=str(out))
    return out, res
