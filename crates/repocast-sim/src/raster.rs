//! Rasterises the chart's shapes ([`crate::plot`]) into an RGB image and
//! encodes it as PNG: square-pen lines, filled dots, and text in the 8x8
//! public-domain font of `font8x8` (scaled x2 for titles), so PNGs come out
//! of `repocast sim` on any machine, without a system font or converter.

use crate::plot::{Anchor, Shape};

struct Canvas {
    w: i64,
    h: i64,
    px: Vec<u8>,
}

fn rgb(colour: &str) -> [u8; 3] {
    let hex = colour.trim_start_matches('#');
    let c = |i: usize| {
        hex.get(i..i + 2)
            .and_then(|s| u8::from_str_radix(s, 16).ok())
            .unwrap_or(0)
    };
    [c(0), c(2), c(4)]
}

impl Canvas {
    fn new(w: u32, h: u32) -> Canvas {
        Canvas {
            w: w as i64,
            h: h as i64,
            px: vec![255; w as usize * h as usize * 3],
        }
    }

    fn set(&mut self, x: i64, y: i64, c: [u8; 3]) {
        if (0..self.w).contains(&x) && (0..self.h).contains(&y) {
            let i = ((y * self.w + x) * 3) as usize;
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }

    /// A filled square of side `size` centred on (x, y).
    fn pen(&mut self, x: f64, y: f64, size: f64, c: [u8; 3]) {
        let r = (size / 2.0).max(0.5);
        let (x0, x1) = ((x - r + 0.5).floor() as i64, (x + r - 0.5).floor() as i64);
        let (y0, y1) = ((y - r + 0.5).floor() as i64, (y + r - 0.5).floor() as i64);
        for yy in y0..=y1.max(y0) {
            for xx in x0..=x1.max(x0) {
                self.set(xx, yy, c);
            }
        }
    }

    fn line(&mut self, a: (f64, f64), b: (f64, f64), width: f64, c: [u8; 3]) {
        let steps = (b.0 - a.0).abs().max((b.1 - a.1).abs()).ceil().max(1.0) as i64;
        for i in 0..=steps {
            let t = i as f64 / steps as f64;
            self.pen(a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t, width, c);
        }
    }

    fn dot(&mut self, at: (f64, f64), r: f64, c: [u8; 3]) {
        let ri = r.ceil() as i64;
        for dy in -ri..=ri {
            for dx in -ri..=ri {
                if ((dx * dx + dy * dy) as f64) <= r * r + 0.5 {
                    self.set(at.0.round() as i64 + dx, at.1.round() as i64 + dy, c);
                }
            }
        }
    }

    /// Text with its baseline at `at.1` (as SVG places it).
    fn text(&mut self, at: (f64, f64), s: &str, anchor: Anchor, size: f64, vertical: bool) {
        let scale: i64 = if size > 13.0 { 2 } else { 1 };
        let glyphs: Vec<[u8; 8]> = s
            .chars()
            .map(|ch| {
                let i = ch as usize;
                if i < 128 {
                    font8x8::legacy::BASIC_LEGACY[i]
                } else {
                    font8x8::legacy::BASIC_LEGACY[b'?' as usize]
                }
            })
            .collect();
        let width = glyphs.len() as i64 * 8 * scale;
        let start = match anchor {
            Anchor::Start => 0,
            Anchor::Middle => -width / 2,
            Anchor::End => -width,
        };
        let (ax, ay) = (at.0.round() as i64, at.1.round() as i64);
        for (n, g) in glyphs.iter().enumerate() {
            for (row, bits) in g.iter().enumerate() {
                for col in 0..8 {
                    if bits & (1 << col) == 0 {
                        continue;
                    }
                    for sy in 0..scale {
                        for sx in 0..scale {
                            // Offsets from the anchor along the text (u) and
                            // down from the baseline (v).
                            let u = start + (n as i64 * 8 + col) * scale + sx;
                            let v = (row as i64 - 7) * scale + sy;
                            let (x, y) = if vertical {
                                (ax + v, ay - u)
                            } else {
                                (ax + u, ay + v)
                            };
                            self.set(x, y, [0, 0, 0]);
                        }
                    }
                }
            }
        }
    }
}

/// Draws `shapes` on a white `w` x `h` canvas; returns the PNG file bytes.
pub fn png(shapes: &[Shape], w: u32, h: u32) -> Vec<u8> {
    let mut c = Canvas::new(w, h);
    for s in shapes {
        match s {
            Shape::Line {
                from,
                to,
                colour,
                width,
            } => c.line(*from, *to, *width, rgb(colour)),
            Shape::Polyline { points, colour } => {
                for pair in points.windows(2) {
                    c.line(pair[0], pair[1], 2.0, rgb(colour));
                }
            }
            Shape::Dot { at, colour } => c.dot(*at, 3.0, rgb(colour)),
            Shape::Text {
                at,
                text,
                anchor,
                size,
                vertical,
            } => c.text(*at, text, *anchor, *size, *vertical),
        }
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Fast);
        // Writing to memory cannot fail for a buffer of the declared size.
        if let Ok(mut wr) = enc.write_header() {
            let _ = wr.write_image_data(&c.px);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_lines_dots_and_text_into_a_valid_png() {
        let shapes = vec![
            Shape::Line {
                from: (0.0, 5.0),
                to: (19.0, 5.0),
                colour: "#ff0000",
                width: 1.0,
            },
            Shape::Dot {
                at: (10.0, 15.0),
                colour: "#00ff00",
            },
            Shape::Text {
                at: (0.0, 30.0),
                text: "Ab".into(),
                anchor: Anchor::Start,
                size: 12.0,
                vertical: false,
            },
        ];
        let bytes = png(&shapes, 20, 40);
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let dec = png::Decoder::new(&bytes[..]);
        let mut r = dec.read_info().expect("decodes");
        let mut buf = vec![0; r.output_buffer_size()];
        let info = r.next_frame(&mut buf).expect("frame");
        assert_eq!((info.width, info.height), (20, 40));
        let at = |x: usize, y: usize| &buf[(y * 20 + x) * 3..(y * 20 + x) * 3 + 3];
        assert_eq!(at(7, 5), [255, 0, 0]);
        assert_eq!(at(10, 15), [0, 255, 0]);
        assert_eq!(at(0, 0), [255, 255, 255]);
        // Some black pixels of the text sit just above its baseline.
        let black = (23..31).flat_map(|y| (0..16).map(move |x| (x, y)));
        assert!(black.filter(|&(x, y)| at(x, y) == [0, 0, 0]).count() > 10);
    }
}
