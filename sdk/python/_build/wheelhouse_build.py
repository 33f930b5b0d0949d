"""A PEP 517 build backend in the standard library alone, for this one pure-Python package.

Why not setuptools: building a wheel with setuptools older than 70.1 needs the ``wheel``
package, which Python's own ``venv`` does not install, so ``pip install ./sdk/python`` without
an index fails in a fresh venv (decision 0039). This backend needs nothing: it zips
``src/wheelhouse`` with the metadata of ``pyproject.toml``'s ``[project]`` table, so pip's
isolated build environment needs no download either. It builds wheels, editable wheels (a
``.pth`` to ``src``) and sdists.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "wheelhouse"
SOURCE = os.path.join(ROOT, "src", PACKAGE)
TAG = "py3-none-any"


def _project() -> Dict[str, object]:
    """The ``[project]`` table's simple members (strings and lists of strings)."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    section = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if section is None:
        raise RuntimeError("pyproject.toml has no [project] table")
    out: Dict[str, object] = {}
    for key, value in re.findall(r'^([A-Za-z-]+)\s*=\s*(".*?"|\[.*?\])\s*$', section.group(1), re.M | re.S):
        out[key] = re.findall(r'"(.*?)"', value) if value.startswith("[") else value[1:-1]
    return out


def _names() -> Tuple[str, str, str]:
    project = _project()
    name, version = str(project["name"]), str(project["version"])
    return name, version, f"{name.replace('-', '_')}-{version}"


def _metadata() -> str:
    project = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project.get('description', '')}",
        f"Requires-Python: {project.get('requires-python', '>=3.8')}",
        "License: MIT",
    ]
    for classifier in project.get("classifiers", []) or []:  # type: ignore[union-attr]
        lines.append(f"Classifier: {classifier}")
    readme = os.path.join(ROOT, "README.md")
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            return "\n".join(lines) + "\n\n" + f.read()
    return "\n".join(lines) + "\n"


def _dist_info_files() -> Dict[str, bytes]:
    return {
        "METADATA": _metadata().encode("utf-8"),
        "WHEEL": f"Wheel-Version: 1.0\nGenerator: wheelhouse_build\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode(),
        "top_level.txt": f"{PACKAGE}\n".encode(),
    }


def _package_files() -> List[Tuple[str, bytes]]:
    files: List[Tuple[str, bytes]] = []
    for directory, dirs, names in os.walk(SOURCE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith((".py", ".typed")):
                path = os.path.join(directory, name)
                with open(path, "rb") as f:
                    files.append((os.path.relpath(path, os.path.dirname(SOURCE)).replace(os.sep, "/"), f.read()))
    return files


def _write_wheel(directory: str, files: List[Tuple[str, bytes]]) -> str:
    _, _, base = _names()
    dist_info = f"{base}.dist-info"
    entries = list(files) + [(f"{dist_info}/{k}", v) for k, v in _dist_info_files().items()]
    record = []
    for path, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    filename = f"{base}-{TAG}.whl"
    with zipfile.ZipFile(os.path.join(directory, filename), "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in entries:
            wheel.writestr(zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0)), data)
        wheel.writestr(zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(2026, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return filename


# -- PEP 517 / 660 hooks -----------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[dict] = None) -> str:
    _, _, base = _names()
    dist_info = os.path.join(metadata_directory, f"{base}.dist-info")
    os.makedirs(dist_info, exist_ok=True)
    for name, data in _dist_info_files().items():
        with open(os.path.join(dist_info, name), "wb") as f:
            f.write(data)
    return f"{base}.dist-info"


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(
    wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None
) -> str:
    return _write_wheel(wheel_directory, _package_files())


def build_editable(
    wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None
) -> str:
    pth = (os.path.join(ROOT, "src") + "\n").encode("utf-8")
    return _write_wheel(wheel_directory, [(f"__editable__.{PACKAGE}.pth", pth)])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    _, _, base = _names()
    filename = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as sdist:
        for top in ("pyproject.toml", "README.md", "_build", "src", "tests"):
            path = os.path.join(ROOT, top)
            if os.path.exists(path):
                sdist.add(path, arcname=f"{base}/{top}", filter=_no_cache)
        info = _metadata().encode("utf-8")
        member = tarfile.TarInfo(f"{base}/PKG-INFO")
        member.size = len(info)
        sdist.addfile(member, io.BytesIO(info))
    return filename


def _no_cache(member: tarfile.TarInfo) -> Optional[tarfile.TarInfo]:
    return None if "__pycache__" in member.name else member
