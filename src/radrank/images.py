"""Load radiographs (DICOM, PNG, JPEG) with MONAI and normalise them for a model's processor.

Environment ``gen-base`` (monai, pydicom, pillow, numpy); nothing here is
imported by the core package.

:func:`load_array` returns a float32 array in [0, 1], shaped as the image is
seen — ``(rows, columns)`` for a grey image, ``(rows, columns, 3)`` for colour —
and :func:`to_pil` turns it into the 8-bit RGB PIL image that Hugging Face
processors expect. :func:`load_pil` is both.

* Readers are MONAI's (``LoadImage`` with ``PydicomReader`` / ``PILReader``).
  Both hand arrays back with the first two axes swapped (MONAI's "reverse
  indexing": ``(columns, rows)``, so that x comes first); they are swapped back
  here, so ``array[r, c]`` is the pixel at row r, column c as any viewer shows it.
* DICOM: MONAI applies the modality LUT (RescaleSlope / RescaleIntercept); the
  VOI window is applied here — the file's first WindowCenter / WindowWidth with
  the DICOM linear (or LINEAR_EXACT / SIGMOID) function when present, else the
  image's own minimum–maximum. ``window=(center, width)`` overrides it,
  ``window="minmax"`` ignores the file's. MONOCHROME1 images (where bright means
  low values) are inverted after windowing, so bone is always bright.
* PNG / JPEG: 8-bit images are divided by 255 as they are; 16-bit and other
  integer images are stretched between their own minimum and maximum. Palette,
  alpha and CMYK images are converted to RGB (alpha dropped) first.
"""

from __future__ import annotations

import math
import threading
import warnings
from pathlib import Path

import numpy as np

DICOM_SUFFIXES = (".dcm", ".dicom")
_PIL_CONVERT = {"P": "RGB", "PA": "RGB", "RGBA": "RGB", "RGBX": "RGB", "CMYK": "RGB", "YCbCr": "RGB", "LAB": "RGB",
                "HSV": "RGB", "LA": "L", "La": "L", "1": "L"}


def is_dicom(path) -> bool:
    path = Path(path)
    if path.suffix.lower() in DICOM_SUFFIXES:
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(132)
    except OSError:
        return False
    return head[128:132] == b"DICM"


def _pil_converter(img):
    target = _PIL_CONVERT.get(img.mode)
    return img.convert(target) if target else img


_LOCAL = threading.local()


def _loader(kind: str):
    """One MONAI ``LoadImage`` per kind ("dicom" / "raster") and thread.

    MONAI's readers keep the file being read on the reader object, so threads
    loading images at the same time each get their own.
    """
    loaders = _LOCAL.__dict__.setdefault("loaders", {})
    if kind not in loaders:
        loaders[kind] = _build_loader(kind)
    return loaders[kind]


def _build_loader(kind: str):
    """A MONAI ``LoadImage`` for ``kind``.

    Building a LoadImage instantiates every reader MONAI knows; the GPU DICOM
    decoder among them warns (and logs) when its optional packages are absent,
    which says nothing about this use, so that noise is silenced here.
    """
    import logging

    from monai.data import PILReader, PydicomReader
    from monai.transforms import LoadImage

    noisy = logging.getLogger("monai.data.nvimgcodec_pydicom_plugin")
    level = noisy.level
    noisy.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader = PydicomReader(prune_metadata=False) if kind == "dicom" else PILReader(converter=_pil_converter)
            return LoadImage(reader=reader, image_only=False, dtype=np.float32)
    finally:
        noisy.setLevel(level)


def _monai_load(path, kind: str):
    """(array, meta) through MONAI's LoadImage, axes as MONAI gives them."""
    with warnings.catch_warnings():
        # Radiographs have no ImageOrientationPatient; MONAI warns that its affine is the identity.
        warnings.simplefilter("ignore")
        img, meta = _loader(kind)(str(path))
    return np.asarray(img.array if hasattr(img, "array") else img, dtype=np.float32), dict(meta)


def _unswap(array: np.ndarray) -> np.ndarray:
    """Undo MONAI's reverse indexing: (x, y[, c]) -> (rows, columns[, c])."""
    return np.ascontiguousarray(np.swapaxes(array, 0, 1))


def _tag(meta: dict, tag: str):
    """First value of a DICOM tag in MONAI's JSON-style metadata, or None."""
    entry = meta.get(tag)
    if not isinstance(entry, dict):
        return None
    values = entry.get("Value")
    if not values:
        return None
    value = values[0]
    if isinstance(value, dict) and "Alphabetic" in value:
        value = value["Alphabetic"]
    return value


def _minmax(x: np.ndarray) -> np.ndarray:
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return np.zeros_like(x, dtype=np.float32)
    lo, hi = float(finite.min()), float(finite.max())
    if hi <= lo:
        return np.zeros_like(x, dtype=np.float32)
    return ((x - lo) / (hi - lo)).astype(np.float32)


def voi_window(x: np.ndarray, center: float, width: float, function: str = "LINEAR") -> np.ndarray:
    """DICOM VOI LUT functions (PS3.3 C.11.2.1.2), output in [0, 1]."""
    x = x.astype(np.float64)
    function = (function or "LINEAR").strip().upper()
    if function == "SIGMOID":
        out = 1.0 / (1.0 + np.exp(-4.0 * (x - center) / width))
    elif function == "LINEAR_EXACT":
        out = (x - center) / width + 0.5
    else:
        if width < 1:
            raise ValueError(f"window width {width} is below 1")
        out = (x - (center - 0.5)) / (width - 1) + 0.5
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def _load_dicom(path, window) -> np.ndarray:
    array, meta = _monai_load(path, "dicom")
    array = _unswap(array)
    if array.ndim == 3 and array.shape[-1] not in (3, 4):
        array = array[..., 0] if array.shape[-1] == 1 else array[..., array.shape[-1] // 2]  # a middle frame
    photometric = str(_tag(meta, "00280004") or "").strip().upper()
    if photometric in ("RGB", "YBR_FULL", "YBR_FULL_422", "YBR_ICT", "YBR_RCT") and array.ndim == 3:
        return _minmax(array[..., :3]) if array.max() > 255 else (array[..., :3] / 255.0).astype(np.float32)
    center, width = _tag(meta, "00281050"), _tag(meta, "00281051")
    function = _tag(meta, "00281056") or "LINEAR"
    if isinstance(window, tuple):
        center, width = window
    if window == "minmax" or center is None or width is None:
        out = _minmax(array)
    else:
        try:
            out = voi_window(array, float(center), float(width), str(function))
        except (TypeError, ValueError):
            out = _minmax(array)
    if photometric == "MONOCHROME1":
        out = (1.0 - out).astype(np.float32)
    return out


def _load_raster(path) -> np.ndarray:
    array, meta = _monai_load(path, "raster")
    array = _unswap(array)
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    if str(meta.get("mode", "")) in ("L", "RGB"):
        return (array / 255.0).astype(np.float32)
    return _minmax(array)


def load_array(path, *, window="auto") -> np.ndarray:
    """The image at ``path`` as float32 in [0, 1], ``(rows, columns)`` or ``(rows, columns, 3)``.

    ``window`` (DICOM only): ``"auto"`` (the file's VOI window, else min–max),
    ``"minmax"``, or ``(center, width)`` in stored units after the modality LUT.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image {path} does not exist")
    if window not in ("auto", "minmax") and not (isinstance(window, tuple) and len(window) == 2
                                                  and all(isinstance(v, (int, float)) and math.isfinite(v)
                                                          for v in window)):
        raise ValueError(f"window must be 'auto', 'minmax' or (center, width); got {window!r}")
    return _load_dicom(path, window) if is_dicom(path) else _load_raster(path)


def to_uint8(array: np.ndarray) -> np.ndarray:
    """[0, 1] floats to uint8 (rounded, clipped)."""
    return np.clip(np.rint(np.asarray(array, dtype=np.float64) * 255.0), 0, 255).astype(np.uint8)


def to_pil(array: np.ndarray):
    """A [0, 1] array (grey or RGB) as an 8-bit RGB PIL image."""
    from PIL import Image

    data = to_uint8(array)
    if data.ndim == 2:
        data = np.repeat(data[..., None], 3, axis=-1)
    if data.ndim != 3 or data.shape[-1] != 3:
        raise ValueError(f"cannot make an RGB image from an array of shape {array.shape}")
    return Image.fromarray(np.ascontiguousarray(data))


def load_pil(path, *, window="auto"):
    """The image at ``path`` as an 8-bit RGB PIL image (see :func:`load_array`)."""
    return to_pil(load_array(path, window=window))


LOADERS = {"pil": load_pil, "array": load_array, "path": lambda p, **_: Path(p)}


def load(path, fmt: str = "pil", **kwargs):
    """Load ``path`` as ``"pil"``, ``"array"`` or ``"path"`` (no loading)."""
    if fmt not in LOADERS:
        raise ValueError(f"image format must be one of {', '.join(LOADERS)}; got {fmt!r}")
    return LOADERS[fmt](path, **kwargs)
