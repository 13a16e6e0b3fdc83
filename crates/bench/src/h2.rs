//! Just enough HTTP/2 for `--alpn h2`: one GET per stream, status read from HPACK,
//! body drained. Frame encoding and status decoding are pure; `exchange` does the I/O.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// Largest frame payload accepted (the default SETTINGS_MAX_FRAME_SIZE).
const MAX_FRAME: usize = 16_384;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&len.to_be_bytes()[1..]);
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn hpack_int(out: &mut Vec<u8>, first: u8, prefix_bits: u8, mut v: usize) {
    let max = (1usize << prefix_bits) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

fn hpack_literal(out: &mut Vec<u8>, name_index: usize, value: &str) {
    // Literal header field without indexing, indexed name; raw (non-Huffman) string.
    hpack_int(out, 0x00, 4, name_index);
    hpack_int(out, 0x00, 7, value.len());
    out.extend_from_slice(value.as_bytes());
}

/// The client preface and our (empty) SETTINGS frame.
pub fn connection_preface() -> Vec<u8> {
    let mut v = PREFACE.to_vec();
    v.extend(frame(SETTINGS, 0, 0, &[]));
    v
}

/// A HEADERS frame carrying `GET path` on `stream` with END_STREAM.
pub fn get_headers(stream: u32, path: &str, authority: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x87]; // :method GET, :scheme https
    if path == "/" {
        block.push(0x84);
    } else {
        hpack_literal(&mut block, 4, path);
    }
    hpack_literal(&mut block, 1, authority);
    frame(HEADERS, END_STREAM | END_HEADERS, stream, &block)
}

fn hpack_read_int(buf: &[u8], prefix_bits: u8) -> Option<(usize, usize)> {
    let max = (1usize << prefix_bits) - 1;
    let first = *buf.first()? as usize & max;
    if first < max {
        return Some((first, 1));
    }
    let mut v = max;
    let mut shift = 0u32;
    for (i, b) in buf.iter().enumerate().skip(1) {
        v = v.checked_add(((*b & 0x7f) as usize).checked_shl(shift)?)?;
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
    None
}

/// Decodes a Huffman-coded string made only of digits (a `:status` value).
fn huffman_digits(bytes: &[u8]) -> Option<String> {
    let mut bits: Vec<bool> = Vec::with_capacity(bytes.len() * 8);
    for b in bytes {
        for i in (0..8).rev() {
            bits.push(b >> i & 1 == 1);
        }
    }
    let mut out = String::new();
    let mut pos = 0;
    let take = |pos: usize, n: usize| -> Option<u32> {
        let s = bits.get(pos..pos + n)?;
        Some(s.iter().fold(0u32, |a, &b| a << 1 | b as u32))
    };
    while pos < bits.len() {
        // Remaining bits all ones and fewer than 8: EOS padding.
        if bits.len() - pos < 8 && bits[pos..].iter().all(|&b| b) {
            break;
        }
        match take(pos, 5)? {
            c @ 0..=2 => {
                out.push((b'0' + c as u8) as char);
                pos += 5;
            }
            _ => {
                let c = take(pos, 6)?;
                if !(0b011001..=0b011111).contains(&c) {
                    return None;
                }
                out.push((b'3' + (c - 0b011001) as u8) as char);
                pos += 6;
            }
        }
    }
    Some(out)
}

/// Finds `:status` at the start of a response header block (servers send it first).
pub fn decode_status(block: &[u8]) -> Option<u16> {
    let b = *block.first()?;
    if b & 0x80 != 0 {
        let (idx, _) = hpack_read_int(block, 7)?;
        return match idx {
            8 => Some(200),
            9 => Some(204),
            10 => Some(206),
            11 => Some(304),
            12 => Some(400),
            13 => Some(404),
            14 => Some(500),
            _ => None,
        };
    }
    let (name, used) = if b & 0xc0 == 0x40 {
        hpack_read_int(block, 6)?
    } else if b & 0xf0 == 0x00 || b & 0xf0 == 0x10 {
        hpack_read_int(block, 4)?
    } else {
        return None; // dynamic table size update or other: not expected first
    };
    if !(8..=14).contains(&name) {
        return None;
    }
    let rest = &block[used..];
    let huff = *rest.first()? & 0x80 != 0;
    let (len, used) = hpack_read_int(rest, 7)?;
    let raw = rest.get(used..used + len)?;
    let text = if huff {
        huffman_digits(raw)?
    } else {
        String::from_utf8(raw.to_vec()).ok()?
    };
    text.parse().ok()
}

/// Failure of an HTTP/2 exchange.
#[derive(Debug)]
pub enum H2Error {
    Io(std::io::Error),
    Protocol(String),
}

/// State of one HTTP/2 connection (we use streams 1, 3, 5 ...).
#[derive(Debug)]
pub struct H2Conn {
    next_stream: u32,
    preface_sent: bool,
}

impl Default for H2Conn {
    fn default() -> Self {
        H2Conn {
            next_stream: 1,
            preface_sent: false,
        }
    }
}

impl H2Conn {
    /// Sends GET on a new stream, reads frames until that stream ends. Returns the status and
    /// whether the connection can carry another request.
    pub async fn exchange<S>(
        &mut self,
        s: &mut S,
        path: &str,
        authority: &str,
    ) -> Result<(u16, bool), H2Error>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let stream = self.next_stream;
        self.next_stream += 2;
        let mut out = Vec::new();
        if !self.preface_sent {
            out = connection_preface();
            self.preface_sent = true;
        }
        out.extend(get_headers(stream, path, authority));
        s.write_all(&out).await.map_err(H2Error::Io)?;
        let mut status = None;
        let mut payload = vec![0u8; MAX_FRAME];
        loop {
            let mut head = [0u8; 9];
            s.read_exact(&mut head).await.map_err(H2Error::Io)?;
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let (kind, flags) = (head[3], head[4]);
            let sid = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
            if len > MAX_FRAME {
                return Err(H2Error::Protocol(format!("h2 frame of {len} bytes")));
            }
            let p = &mut payload[..len];
            s.read_exact(p).await.map_err(H2Error::Io)?;
            match kind {
                SETTINGS if flags & ACK == 0 => {
                    s.write_all(&frame(SETTINGS, ACK, 0, &[]))
                        .await
                        .map_err(H2Error::Io)?;
                }
                PING if flags & ACK == 0 => {
                    s.write_all(&frame(PING, ACK, 0, p))
                        .await
                        .map_err(H2Error::Io)?;
                }
                GOAWAY => {
                    return match status {
                        Some(_) => Err(H2Error::Protocol("h2 GOAWAY mid-response".into())),
                        None => Err(H2Error::Protocol("h2 GOAWAY before response".into())),
                    }
                }
                RST_STREAM if sid == stream => {
                    return Err(H2Error::Protocol("h2 stream reset by server".into()))
                }
                HEADERS if sid == stream => {
                    let mut block: &[u8] = p;
                    if flags & PADDED != 0 {
                        let pad = *block.first().unwrap_or(&0) as usize;
                        block = block.get(1..block.len().saturating_sub(pad)).unwrap_or(&[]);
                    }
                    if flags & PRIORITY != 0 {
                        block = block.get(5..).unwrap_or(&[]);
                    }
                    if status.is_none() {
                        status = Some(decode_status(block).ok_or_else(|| {
                            H2Error::Protocol("h2 response without a readable :status".into())
                        })?);
                    }
                    if flags & END_STREAM != 0 {
                        break;
                    }
                }
                DATA if sid == stream => {
                    if len > 0 {
                        let inc = (len as u32).to_be_bytes();
                        let mut wu = frame(WINDOW_UPDATE, 0, 0, &inc);
                        if flags & END_STREAM == 0 {
                            wu.extend(frame(WINDOW_UPDATE, 0, stream, &inc));
                        }
                        s.write_all(&wu).await.map_err(H2Error::Io)?;
                    }
                    if flags & END_STREAM != 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
        let status =
            status.ok_or_else(|| H2Error::Protocol("h2 stream ended without headers".into()))?;
        Ok((status, self.next_stream < 0x7fff_0000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_forms() {
        assert_eq!(decode_status(&[0x88]), Some(200));
        assert_eq!(decode_status(&[0x8d]), Some(404));
        assert_eq!(decode_status(&[0x08, 0x03, b'2', b'0', b'1']), Some(201));
        assert_eq!(decode_status(&[0x48, 0x03, b'5', b'0', b'3']), Some(503));
        // "302" Huffman: 0 00010 | 0 00000 | 00010 + EOS padding
        // bits: 011001 00000 00010 -> 0110 0100 0000 0010 = 0x64 0x02 (16 bits exactly)
        assert_eq!(huffman_digits(&[0x64, 0x02]).as_deref(), Some("302"));
        assert_eq!(decode_status(&[0x48, 0x82, 0x64, 0x02]), Some(302));
        assert_eq!(decode_status(&[0x82]), None);
        assert_eq!(decode_status(&[]), None);
    }

    #[test]
    fn request_frames() {
        let p = connection_preface();
        assert!(p.starts_with(PREFACE));
        assert_eq!(&p[PREFACE.len()..], &[0, 0, 0, SETTINGS, 0, 0, 0, 0, 0]);
        let h = get_headers(1, "/x", "h:1");
        assert_eq!(h[3], HEADERS);
        assert_eq!(h[4], END_STREAM | END_HEADERS);
        assert_eq!(&h[5..9], &[0, 0, 0, 1]);
        assert_eq!(
            &h[9..],
            &[0x82, 0x87, 0x04, 2, b'/', b'x', 0x01, 3, b'h', b':', b'1']
        );
        let mut v = Vec::new();
        hpack_int(&mut v, 0, 7, 300);
        assert_eq!(hpack_read_int(&v, 7), Some((300, v.len())));
    }
}
