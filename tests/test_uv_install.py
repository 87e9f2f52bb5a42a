"""tools/uv_install.py: uv installs from where pip is configured to look, so both take the same releases."""
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("uv_install", ROOT / "tools" / "uv_install.py")
uv_install = importlib.util.module_from_spec(spec)
spec.loader.exec_module(uv_install)

# as `pip config list` prints them: PIP_* variables under :env:, the files' sections under their names
LISTED = """:env:.find-links='/opt/wheels'
:env:.default-timeout='180'
global.cert='/etc/ssl/certs/ca.crt'
global.constraint='/etc/pip/constraints.txt'
global.extra-index-url='file:///opt/a/simple https://mirror.example/simple'
global.find-links='/srv/overridden'
install.index-url='https://index.example/simple'
global.index-url='https://overridden.example/simple'
"""


def test_pips_variables_win_over_its_install_section_and_that_over_global():
    assert uv_install.pip_settings(LISTED) == {
        "find-links": "/opt/wheels", "default-timeout": "180", "cert": "/etc/ssl/certs/ca.crt",
        "constraint": "/etc/pip/constraints.txt", "extra-index-url": "file:///opt/a/simple https://mirror.example/simple",
        "index-url": "https://index.example/simple"}


def test_each_setting_becomes_uvs_flag_once_per_value_and_the_rest_its_variables():
    flags, variables = uv_install.uv_arguments(uv_install.pip_settings(LISTED))
    assert flags == ["--index-strategy", "unsafe-best-match", "--default-index", "https://index.example/simple",
                     "--index", "file:///opt/a/simple", "--index", "https://mirror.example/simple",
                     "--find-links", "/opt/wheels", "--constraints", "/etc/pip/constraints.txt"]
    assert variables == {"SSL_CERT_FILE": "/etc/ssl/certs/ca.crt", "UV_HTTP_TIMEOUT": "180"}


def test_no_pip_configuration_leaves_uv_on_its_defaults():
    assert uv_install.uv_arguments(uv_install.pip_settings("")) == (["--index-strategy", "unsafe-best-match"], {})


def test_uv_told_pips_settings_picks_the_torch_build_this_environment_holds(capfd):
    """On a machine whose CPU build of torch lies in a find-links folder, uv alone would take PyPI's CUDA build."""
    if not (Path(sys.prefix) / "bin" / "uv").exists():
        pytest.skip("this environment was installed without uv (make setup installs it)")
    installed = importlib.metadata.version("torch")
    assert uv_install.main([sys.prefix, "--dry-run", "--reinstall-package", "torch",
                            f"torch=={installed.split('+')[0]}"]) == 0
    planned = capfd.readouterr().err
    chosen = [line.split()[1] for line in planned.splitlines() if line.startswith(" + torch==")]
    assert chosen == [f"torch=={installed}"]  # without pip's find-links here: torch==2.13.0, the CUDA build
