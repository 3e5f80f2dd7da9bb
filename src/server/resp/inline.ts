/**
 * Split an inline (telnet-style) command line into arguments exactly as Redis's `sdssplitargs` does:
 * arguments are separated by blanks; `"double quotes"` understand `\n \r \t \b \a \\ \" \xHH`;
 * `'single quotes'` understand `\'` only; a closing quote must be followed by a blank or the end of the line;
 * a quote may start in the middle of an argument (`a"b c"` is `ab c`). A NUL byte ends the line (C string).
 *
 * Returns undefined for unbalanced quotes (Redis: `Protocol error: unbalanced quotes in request`).
 */
export function splitInlineArgs(line: Uint8Array): Buffer[] | undefined {
  const src = Buffer.from(line.buffer, line.byteOffset, line.byteLength);
  const nul = src.indexOf(0);
  const end = nul === -1 ? src.length : nul;
  const out: Buffer[] = [];
  let p = 0;
  for (;;) {
    while (p < end && isSpace(src[p]!)) p++;
    if (p >= end) return out;
    const start = p;
    let bytes: number[] | undefined; // only when quoting made the argument differ from the raw bytes
    let inDouble = false;
    let inSingle = false;
    let tokenEnd = end;
    for (;;) {
      const c = p < end ? src[p]! : -1;
      if (inDouble) {
        if (c === -1) return undefined;
        if (c === 0x5c && p + 3 < end && src[p + 1] === 0x78 && isHex(src[p + 2]!) && isHex(src[p + 3]!)) {
          bytes!.push(hexValue(src[p + 2]!) * 16 + hexValue(src[p + 3]!));
          p += 4;
        } else if (c === 0x5c && p + 1 < end) {
          bytes!.push(escapedByte(src[p + 1]!));
          p += 2;
        } else if (c === 0x22) {
          p++;
          if (p < end && !isSpace(src[p]!)) return undefined;
          break;
        } else {
          bytes!.push(c);
          p++;
        }
      } else if (inSingle) {
        if (c === -1) return undefined;
        if (c === 0x5c && p + 1 < end && src[p + 1] === 0x27) {
          bytes!.push(0x27);
          p += 2;
        } else if (c === 0x27) {
          p++;
          if (p < end && !isSpace(src[p]!)) return undefined;
          break;
        } else {
          bytes!.push(c);
          p++;
        }
      } else if (c === -1 || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) {
        tokenEnd = p;
        if (c !== -1) p++;
        break;
      } else if (c === 0x22 || c === 0x27) {
        bytes ??= Array.from(src.subarray(start, p));
        if (c === 0x22) inDouble = true;
        else inSingle = true;
        p++;
      } else {
        bytes?.push(c);
        p++;
      }
    }
    out.push(bytes ? Buffer.from(bytes) : src.subarray(start, tokenEnd));
  }
}

/** C isspace(): space, \t, \n, \v, \f, \r. */
function isSpace(c: number): boolean {
  return c === 0x20 || (c >= 0x09 && c <= 0x0d);
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);
}

function hexValue(c: number): number {
  if (c <= 0x39) return c - 0x30;
  if (c >= 0x61) return c - 0x61 + 10;
  return c - 0x41 + 10;
}

function escapedByte(c: number): number {
  switch (c) {
    case 0x6e:
      return 0x0a; // \n
    case 0x72:
      return 0x0d; // \r
    case 0x74:
      return 0x09; // \t
    case 0x62:
      return 0x08; // \b
    case 0x61:
      return 0x07; // \a
    default:
      return c;
  }
}
