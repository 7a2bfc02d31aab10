"""Canvas renders: cached by content, identical to a fresh render."""

from __future__ import annotations

import base64
import io
import struct
import zlib

import pytest
from PIL import Image

from evalkit.envs.embedded.canvas.model import Doc, build_element
from evalkit.envs.embedded.canvas.render import encode, jpeg_b64_of, png_of, render_doc
from evalkit.envs.embedded.canvas.tasks import generate_task


def pixels(data: bytes) -> bytes:
    return Image.open(io.BytesIO(data)).convert("RGB").tobytes()


def test_png_of_is_the_render_and_follows_the_content():
    doc = Doc(400, 300)
    doc.elements.append(build_element("e1", "ellipse", x=20.25, y=30, width=100, height=50, fill="#123456"))
    first = png_of(doc)
    assert pixels(first) == render_doc(doc).tobytes()
    assert png_of(doc.copy()) is first  # the same content: the same bytes, not encoded again
    doc.elements[0].x += 0.5  # below the document's own rounding: still another picture
    assert png_of(doc) is not first and pixels(png_of(doc)) == render_doc(doc).tobytes()
    assert pixels(png_of(doc, 100)) == render_doc(doc, 100).tobytes()


def test_jpeg_of_a_target_matches_its_render():
    doc = generate_task("test", 5).doc
    jpeg = base64.b64decode(jpeg_b64_of(doc))
    assert jpeg == encode(render_doc(doc), "JPEG")


def test_every_evalset_task_renders_at_every_size():
    """Tasks of the frozen evalset whose small outlined rounded boxes Pillow refuses to draw (0171 at 160 px,
    0177 at 256, 0269 at 512 and 256) could never be graded; each size the grader and surfaces use draws."""
    from evalkit.envs.embedded.canvas.render import render_doc
    from evalkit.envs.embedded.canvas.tasks import EVALSET_SIZE, generate_task

    for i in range(EVALSET_SIZE):
        doc = generate_task("test", i).doc
        for size in (160, 256, 512, None):
            render_doc(doc, size)


def test_jpeg_encoding_is_pils_at_quality_90_whatever_the_mode():
    """encode() saves an RGB render without converting (copying) it first: the same bytes as PIL's own save
    of the converted image, and any other mode is still converted."""
    img = render_doc(generate_task("test", 9).doc)
    buf = io.BytesIO()
    img.convert("RGB").save(buf, "JPEG", quality=90)
    assert encode(img, "JPEG") == buf.getvalue()
    rgba = img.convert("RGBA")
    assert encode(rgba, "JPEG") == buf.getvalue()


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """A PNG's chunks as (kind, data), each one's CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    out, i = [], 8
    while i < len(data):
        (n,) = struct.unpack(">I", data[i : i + 4])
        kind, body = data[i + 4 : i + 8], data[i + 8 : i + 8 + n]
        assert struct.unpack(">I", data[i + 8 + n : i + 12 + n])[0] == zlib.crc32(kind + body), kind
        out.append((kind, body))
        i += 12 + n
    return out


def _unfiltered(data: bytes) -> bytes:
    """The RGB pixels of an 8-bit RGB PNG, undone by hand from the specification's five filters, so that
    the check does not rest on Pillow's reader alone."""
    chunks = _chunks(data)
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (chunks[0][0], depth, colour, interlace, chunks[-1][0]) == (b"IHDR", 8, 2, 0, b"IEND")
    raw = zlib.decompress(
        b"".join(body for kind, body in chunks if kind == b"IDAT")
    )  # the standard library's
    stride, prev, out = width * 3, bytearray(width * 3), bytearray()
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - 3] if x >= 3 else 0
            b, c = prev[x], prev[x - 3] if x >= 3 else 0
            pred = [
                0,
                a,
                b,
                (a + b) // 2,
                min((a, b, c), key=lambda v: (abs(a + b - c - v), (a, b, c).index(v))),
            ]
            line[x] = (line[x] + pred[kind]) & 0xFF
        out += line
        prev = line
    return bytes(out)


def test_pngs_hold_the_render_pixel_for_pixel_with_either_deflate(monkeypatch):
    """Every render goes out as a PNG of its own writing (up-filtered rows, deflated with ISA-L when it is
    installed, else with the standard library): a valid file whose pixels are the render's, read back both by
    Pillow and by hand from the specification; another mode is Pillow's own PNG."""
    from evalkit.envs.embedded.canvas import render

    docs = [generate_task("test", i).doc for i in (0, 7, 171)]
    docs[0].elements.append(
        build_element("t", "text", x=3.3, y=4.6, width=0, height=0, text="Menu", font_size=18)
    )
    for deflate in (render.isal_zlib, None):
        monkeypatch.setattr(render, "isal_zlib", deflate)
        for doc in docs:
            for size in (None, 160, 97, 16):
                img = render_doc(doc, size)
                data = encode(img)
                assert pixels(data) == img.tobytes(), (deflate, size)
                if size in (97, 16):
                    assert _unfiltered(data) == img.tobytes()
    rgba = render_doc(docs[1], 97).convert("RGBA")
    assert Image.open(io.BytesIO(encode(rgba))).tobytes() == rgba.tobytes()


@pytest.mark.browser
def test_chromium_shows_a_png_as_rendered():
    """The viewer and the models read these files too: Chromium decodes one to the render's pixels."""
    from evalkit.browser import chromium_executable, new_session

    if chromium_executable() is None:
        pytest.skip("no Chromium: install Debian's chromium or set EVALKIT_CHROMIUM")
    img = render_doc(generate_task("test", 3).doc, 97)
    url = "data:image/png;base64," + base64.b64encode(encode(img)).decode()
    s = new_session(width=200, height=200, allow_origins=())
    try:
        seen = s.sync.evaluate(
            """async url => {
                const im = new Image(); im.src = url; await im.decode();
                const c = document.createElement('canvas'); c.width = im.width; c.height = im.height;
                const g = c.getContext('2d'); g.drawImage(im, 0, 0);
                return [im.width, im.height, Array.from(g.getImageData(0, 0, im.width, im.height).data)];
            }""",
            url,
        )
    finally:
        s.sync.close()
    width, height, rgba = seen
    assert (width, height) == img.size
    assert bytes(v for i, v in enumerate(rgba) if i % 4 != 3) == img.tobytes()


def test_measured_text_boxes_follow_the_text_and_its_size():
    """Text boxes are cached by font size and text: each is FreeType's own measure of exactly that text."""
    from evalkit.envs.embedded.canvas.render import font, glyph_box, text_box

    for size in (9, 16, 33):
        for text in ("Sale", "Sale!", "Q3 review", "two\nlines", " "):
            assert glyph_box(size, text) == font(size).getbbox(text)
    el = build_element("e1", "text", x=10, y=20, width=0, height=0, text="Hello", font_size=20)
    before = text_box(el)
    el.text = "Hello, world"
    assert text_box(el)[2] > before[2]
    el.font_size = 40
    assert text_box(el)[3] > before[3]


def test_cached_text_masks_draw_what_pillow_draws():
    """Text masks are kept between draws (`render._Font`): every draw, first or repeated, in any colour, at
    any fractional position, must be the pixels Pillow's own font draws there."""
    from PIL import ImageDraw, ImageFont

    from evalkit.envs.embedded.canvas.render import font

    cases = [
        (text, size, xy, fill)
        for text in ("Sale", "Q3 review", "two\nlines", "Ünïcödé ✓")
        for size in (3, 12, 33)
        for xy in ((5, 7), (5.4, 7.75))
        for fill in ("#1f77b4", "#ff7f0e")
    ]
    for _ in range(2):  # the second pass draws from the kept masks
        for text, size, xy, fill in cases:
            drawn = []
            for f in (font(size), ImageFont.load_default(size=size)):
                img = Image.new("RGB", (160, 90), "#ffffff")
                ImageDraw.Draw(img).text(xy, text, fill=fill, font=f)
                drawn.append(img.tobytes())
            assert drawn[0] == drawn[1], (text, size, xy, fill)


def test_caches_keep_the_most_recent_within_their_bounds():
    from evalkit.envs.embedded.canvas.render import Cache

    made = []

    def make(key):
        made.append(key)
        return "x" * key

    cache = Cache(size=3, weigh=len, budget=10)
    for key in (1, 2, 3, 1, 4):
        assert cache.get(key, lambda k=key: make(k)) == "x" * key
    assert made == [1, 2, 3, 4]  # 1 again was kept
    assert list(cache._items) == [3, 1, 4]  # 2, the least recently used, went for the fourth
    cache.get(9, lambda: make(9))  # 9 of a budget of 10: the rest goes
    assert list(cache._items) == [9] and cache._weight == 9
    cache.get(20, lambda: make(20))  # over the budget on its own: returned, not kept
    assert list(cache._items) == [] and cache._weight == 0


def test_renders_from_many_threads_are_the_serial_ones():
    """Sessions render and grade in threads of their own (HTTP routes) beside the event loop: the shared
    caches (encoded pictures, text masks, text boxes) give each thread what a render alone gives."""
    from concurrent.futures import ThreadPoolExecutor

    from evalkit.envs.embedded.canvas import render

    docs = [generate_task("train", i).doc for i in range(24)]
    menu = build_element("t", "text", x=3.3, y=4.6, width=0, height=0, text="Menu", font_size=18)
    for d in docs:
        d.elements.append(menu)
    jobs = [(d, s) for d in docs for s in (None, 160, 97)]
    render._masks.clear()
    alone = [render_doc(d, s).tobytes() for d, s in jobs]
    render._masks.clear()
    render._encoded.clear()
    with ThreadPoolExecutor(6) as pool:
        threaded = list(pool.map(lambda job: pixels(png_of(*job)), jobs * 2))
    assert threaded == alone * 2
