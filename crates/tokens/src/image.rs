//! Image tokens from the image's real size, the way each provider bills it.
//!
//! Inline images (base64, or `data:` URLs) carry their dimensions in the
//! first bytes of the file (PNG, GIF, WebP; JPEG's frame header). Anthropic
//! bills `width × height / 750` after scaling to at most 1568 px on the
//! long edge and about 1.15 megapixels; OpenAI bills 85 tokens plus 170 per
//! 512-px tile after fitting 2048 px and scaling the short side to 768 (85
//! alone for `detail: low`). An image whose size cannot be read (a URL,
//! an unknown format) counts [`IMAGE_TOKENS`], the cost of the largest
//! image Anthropic accepts unscaled.

use abridge_model::{ImagePart, ImageSource};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::tokenizer::TokenizerKind;

/// Tokens charged for an image whose size is not known.
pub const IMAGE_TOKENS: usize = 1_600;

/// Base64 characters decoded to look for a JPEG frame header (48 KiB).
const SCAN_CHARS: usize = 65_536;

/// Tokens of one image part.
pub(crate) fn image_tokens(kind: TokenizerKind, img: &ImagePart) -> usize {
    let Some((w, h)) = dimensions(&img.source) else {
        return IMAGE_TOKENS;
    };
    match kind {
        TokenizerKind::O200kBase | TokenizerKind::Cl100kBase => {
            let low = img.source_extra.get("detail").and_then(|d| d.as_str()) == Some("low");
            if low { 85 } else { openai(w, h) }
        }
        _ => anthropic(w, h),
    }
}

fn anthropic(w: u32, h: u32) -> usize {
    let (mut w, mut h) = (f64::from(w), f64::from(h));
    let long = w.max(h);
    if long > 1568.0 {
        let s = 1568.0 / long;
        (w, h) = (w * s, h * s);
    }
    if w * h > 1_150_000.0 {
        let s = (1_150_000.0 / (w * h)).sqrt();
        (w, h) = (w * s, h * s);
    }
    ((w.floor() * h.floor()) / 750.0).ceil().max(1.0) as usize
}

fn openai(w: u32, h: u32) -> usize {
    let (mut w, mut h) = (f64::from(w), f64::from(h));
    if w.max(h) > 2048.0 {
        let s = 2048.0 / w.max(h);
        (w, h) = (w * s, h * s);
    }
    if w.min(h) > 768.0 {
        let s = 768.0 / w.min(h);
        (w, h) = (w * s, h * s);
    }
    let tiles = (w / 512.0).ceil() * (h / 512.0).ceil();
    85 + 170 * tiles as usize
}

/// Width and height of an inline image, from its header.
fn dimensions(source: &ImageSource) -> Option<(u32, u32)> {
    let data = match source {
        ImageSource::Base64 { data, .. } => data.as_str(),
        ImageSource::Url(u) => u.strip_prefix("data:")?.split_once(";base64,")?.1,
    };
    let head = &data[..floor4(data, SCAN_CHARS)];
    let bytes = STANDARD
        .decode(head.trim_end_matches('='))
        .ok()
        .or_else(|| {
            // Padding in the middle of a cut: decode what is whole.
            STANDARD
                .decode(&head[..floor4(head, head.len().saturating_sub(4))])
                .ok()
        })?;
    png(&bytes)
        .or_else(|| gif(&bytes))
        .or_else(|| webp(&bytes))
        .or_else(|| jpeg(&bytes))
        .filter(|(w, h)| *w > 0 && *h > 0)
}

/// The largest prefix of at most `max` characters whose length is a multiple of 4.
fn floor4(s: &str, max: usize) -> usize {
    let mut n = s.len().min(max) / 4 * 4;
    while n > 0 && !s.is_char_boundary(n) {
        n -= 4;
    }
    n
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le16(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_le_bytes(
        b.get(at..at + 2)?.try_into().ok()?,
    )))
}

fn be16(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_be_bytes(
        b.get(at..at + 2)?.try_into().ok()?,
    )))
}

fn png(b: &[u8]) -> Option<(u32, u32)> {
    (b.starts_with(b"\x89PNG\r\n\x1a\n") && b.get(12..16) == Some(b"IHDR"))
        .then(|| Some((be32(b, 16)?, be32(b, 20)?)))?
}

fn gif(b: &[u8]) -> Option<(u32, u32)> {
    (b.starts_with(b"GIF8")).then(|| Some((le16(b, 6)?, le16(b, 8)?)))?
}

fn webp(b: &[u8]) -> Option<(u32, u32)> {
    if !(b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP")) {
        return None;
    }
    let le24 = |at: usize| -> Option<u32> {
        let s = b.get(at..at + 3)?;
        Some(u32::from(s[0]) | u32::from(s[1]) << 8 | u32::from(s[2]) << 16)
    };
    match b.get(12..16)? {
        b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
        b"VP8L" => {
            let bits = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
            Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        b"VP8 " => Some((le16(b, 26)? & 0x3FFF, le16(b, 28)? & 0x3FFF)),
        _ => None,
    }
}

/// The first start-of-frame marker's height and width.
fn jpeg(b: &[u8]) -> Option<(u32, u32)> {
    if !b.starts_with(&[0xFF, 0xD8]) {
        return None;
    }
    let mut i = 2;
    while i + 9 < b.len() {
        if b[i] != 0xFF {
            return None;
        }
        let marker = b[i + 1];
        let len = be16(b, i + 2)? as usize;
        let sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if sof {
            return Some((be16(b, i + 7)?, be16(b, i + 5)?));
        }
        i += 2 + len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use abridge_model::Extra;

    fn part(bytes: &[u8]) -> ImagePart {
        ImagePart {
            source: ImageSource::Base64 {
                media_type: "image/png".into(),
                data: STANDARD.encode(bytes),
            },
            source_extra: Extra::new(),
            extra: Extra::new(),
        }
    }

    fn png_of(w: u32, h: u32) -> Vec<u8> {
        let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        b
    }

    #[test]
    fn sizes_as_each_provider_bills_them() {
        let claude = TokenizerKind::ClaudeCalibrated;
        // 1000×1000: under both Anthropic limits → 1,000,000 / 750.
        assert_eq!(image_tokens(claude, &part(&png_of(1000, 1000))), 1334);
        // 200×100: 27 tokens.
        assert_eq!(image_tokens(claude, &part(&png_of(200, 100))), 27);
        // OpenAI: 1024×1024 → 768×768 → 4 tiles → 85 + 680.
        assert_eq!(
            image_tokens(TokenizerKind::O200kBase, &part(&png_of(1024, 1024))),
            765
        );
        let mut low = part(&png_of(4000, 3000));
        low.source_extra.insert("detail".into(), "low".into());
        assert_eq!(image_tokens(TokenizerKind::O200kBase, &low), 85);
        // Unknown bytes or a remote URL: the flat upper bound.
        assert_eq!(image_tokens(claude, &part(b"not an image")), IMAGE_TOKENS);
        let url = ImagePart {
            source: ImageSource::Url("https://example.invalid/a.png".into()),
            source_extra: Extra::new(),
            extra: Extra::new(),
        };
        assert_eq!(image_tokens(claude, &url), IMAGE_TOKENS);
    }

    #[test]
    fn headers_of_each_format() {
        let gif = [b"GIF89a".as_slice(), &[0x40, 0x01, 0xF0, 0x00], &[0; 8]].concat();
        assert_eq!(gif_dims(&gif), Some((320, 240)));
        // A JPEG with an APP0 segment before its SOF0.
        let bytes = [
            &[0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0, 0][..],
            &[
                0xFF, 0xC0, 0x00, 0x11, 0x08, 0x01, 0xE0, 0x02, 0x80, 3, 0, 0, 0, 0, 0, 0,
            ][..],
        ]
        .concat();
        assert_eq!(jpeg(&bytes), Some((640, 480)));
        let data_url = ImageSource::Url(format!(
            "data:image/png;base64,{}",
            STANDARD.encode(png_of(64, 32))
        ));
        assert_eq!(dimensions(&data_url), Some((64, 32)));
    }

    fn gif_dims(b: &[u8]) -> Option<(u32, u32)> {
        gif(b)
    }
}
