"""radrank.images: DICOM / PNG / JPEG through MONAI, orientation, windowing, MONOCHROME1, PIL output."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import tiny_data
from radrank import images
from tiny_data import COLS, ROWS


def _linear(x, center, width):
    """DICOM PS3.3 C.11.2.1.2.1 linear VOI function, scaled to [0, 1] (written out independently)."""
    x = np.asarray(x, dtype=np.float64)
    lo = center - 0.5 - (width - 1) / 2
    hi = center - 0.5 + (width - 1) / 2
    mid = ((x - (center - 0.5)) / (width - 1) + 0.5)
    return np.where(x <= lo, 0.0, np.where(x > hi, 1.0, mid))


def test_dicom_orientation_and_minmax(tmp_path):
    arr = tiny_data.pattern()
    path = tiny_data.write_dicom(tmp_path / "a.dcm", arr)
    out = images.load_array(path)
    assert out.shape == (ROWS, COLS) and out.dtype == np.float32
    # MONAI hands back (columns, rows); radrank swaps back: the marked pixel is at row 0, last column.
    assert out[0, COLS - 1] == pytest.approx(1.0)
    expected = (arr - arr.min()) / (arr.max() - arr.min())
    np.testing.assert_allclose(out, expected, atol=1e-6)


def test_dicom_window_from_file_and_override(tmp_path):
    arr = tiny_data.pattern()
    path = tiny_data.write_dicom(tmp_path / "w.dcm", arr, window=(1000, 800))
    np.testing.assert_allclose(images.load_array(path), _linear(arr, 1000, 800), atol=1e-6)
    np.testing.assert_allclose(images.load_array(path, window=(500, 1001)), _linear(arr, 500, 1001), atol=1e-6)
    minmax = images.load_array(path, window="minmax")
    assert minmax.min() == 0 and minmax.max() == pytest.approx(1.0)
    with pytest.raises(ValueError):
        images.load_array(path, window="soft-tissue")


def test_dicom_rescale_then_window(tmp_path):
    arr = tiny_data.pattern(high=2000)
    path = tiny_data.write_dicom(tmp_path / "r.dcm", arr, rescale=(2.0, -1024.0), window=(0, 2000))
    hu = arr.astype(np.float64) * 2.0 - 1024.0  # the modality LUT comes first (applied by MONAI)
    np.testing.assert_allclose(images.load_array(path), _linear(hu, 0, 2000), atol=1e-6)


def test_dicom_sigmoid_window(tmp_path):
    arr = tiny_data.pattern()
    path = tiny_data.write_dicom(tmp_path / "s.dcm", arr, window=(1000, 800), voi_function="SIGMOID")
    expected = 1 / (1 + np.exp(-4 * (arr.astype(np.float64) - 1000) / 800))
    np.testing.assert_allclose(images.load_array(path), expected, atol=1e-6)


def test_monochrome1_is_inverted(tmp_path):
    arr = tiny_data.pattern()
    m2 = images.load_array(tiny_data.write_dicom(tmp_path / "m2.dcm", arr))
    m1 = images.load_array(tiny_data.write_dicom(tmp_path / "m1.dcm", arr, photometric="MONOCHROME1"))
    np.testing.assert_allclose(m1, 1.0 - m2, atol=1e-6)
    assert m1[0, COLS - 1] == pytest.approx(0.0)  # the highest stored value is darkest in MONOCHROME1


def test_rgb_dicom(tmp_path):
    arr = np.zeros((ROWS, COLS, 3), np.uint8)
    arr[0, COLS - 1] = (255, 0, 0)
    out = images.load_array(tiny_data.write_dicom(tmp_path / "rgb.dcm", arr))
    assert out.shape == (ROWS, COLS, 3)
    np.testing.assert_allclose(out[0, COLS - 1], [1.0, 0.0, 0.0])


def test_dicom_detected_without_suffix(tmp_path):
    path = tiny_data.write_dicom(tmp_path / "noext", tiny_data.pattern())
    assert images.is_dicom(path)
    assert images.load_array(path).shape == (ROWS, COLS)


def test_png_gray8_kept_as_is(tmp_path):
    arr = tiny_data.gray8(77)
    out = images.load_array(tiny_data.write_png(tmp_path / "g.png", arr))
    assert out.shape == (ROWS, COLS)
    np.testing.assert_allclose(out * 255, arr, atol=1e-4)


def test_png_16bit_stretched(tmp_path):
    arr = tiny_data.pattern(high=4095)
    path = tiny_data.write_png(tmp_path / "h.png", arr)
    assert Image.open(path).mode.startswith("I")
    out = images.load_array(path)
    np.testing.assert_allclose(out, (arr - arr.min()) / (arr.max() - arr.min()), atol=1e-6)


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "P", "LA"])
def test_png_colour_modes(tmp_path, mode):
    arr = np.zeros((ROWS, COLS, 3), np.uint8)
    arr[0, COLS - 1] = (255, 255, 255)
    arr[ROWS - 1, 0] = (0, 0, 255)
    out = images.load_array(tiny_data.write_png(tmp_path / f"{mode}.png", arr, mode=mode))
    assert out.shape[:2] == (ROWS, COLS)
    assert np.all(np.atleast_1d(out[0, COLS - 1]) == pytest.approx(1.0))


def test_jpeg(tmp_path):
    arr = np.zeros((16, 24), np.uint8)
    arr[:8, 12:] = 255  # a bright block top right survives JPEG
    path = tmp_path / "x.jpg"
    Image.fromarray(arr).save(path, quality=95)
    out = images.load_array(path)
    assert out.shape == (16, 24)
    assert out[:8, 12:].mean() > 0.9 and out[8:, :12].mean() < 0.1


def test_pil_output(tmp_path):
    arr = tiny_data.pattern()
    img = images.load_pil(tiny_data.write_dicom(tmp_path / "p.dcm", arr, photometric="MONOCHROME1"))
    assert img.mode == "RGB" and img.size == (COLS, ROWS)  # PIL sizes are (width, height)
    px = np.asarray(img)
    assert px.dtype == np.uint8 and px.shape == (ROWS, COLS, 3)
    assert tuple(px[0, COLS - 1]) == (0, 0, 0)
    assert (px[..., 0] == px[..., 1]).all() and (px[..., 1] == px[..., 2]).all()
    assert images.load(tmp_path / "p.dcm", "path") == tmp_path / "p.dcm"
    with pytest.raises(ValueError):
        images.load(tmp_path / "p.dcm", "tensor")


def test_to_uint8_rounds_and_clips():
    np.testing.assert_array_equal(images.to_uint8(np.array([-0.5, 0.0, 0.5, 1.0, 2.0])), [0, 0, 128, 255, 255])
    with pytest.raises(ValueError):
        images.to_pil(np.zeros((2, 2, 4)))


def test_unreadable_and_missing(tmp_path):
    with pytest.raises(FileNotFoundError):
        images.load_array(tmp_path / "missing.png")
    bad = tmp_path / "bad.dcm"
    bad.write_bytes(b"not a dicom at all")
    with pytest.raises(Exception):
        images.load_array(bad)


def test_threads_get_their_own_readers(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    paths = [tiny_data.write_dicom(tmp_path / f"t{i}.dcm", tiny_data.pattern(high=1000 + 100 * i)) for i in range(8)]
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(images.load_array, paths * 3))
    serial = [images.load_array(p) for p in paths * 3]
    for a, b in zip(outs, serial):
        np.testing.assert_array_equal(a, b)
