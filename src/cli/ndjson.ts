/**
 * Lines of a stream, one at a time, for newline-delimited JSON of any length: memory holds
 * one chunk and one line, never the file. The stream is read only as fast as the loop over
 * the lines goes on, so a slow consumer holds the reading back instead of buffering ahead.
 */

/** One line, without its `\n` (or `\r\n`). */
export interface Line {
  /** From 1, counting blank lines, as an editor does. */
  number: number;
  text: string;
  /** Its length in the stream, the newline included. */
  bytes: number;
}

const NEWLINE = 0x0a;

/**
 * The lines of `input`. Splits bytes, not text: a newline byte is never part of a multi-byte
 * UTF-8 character, so each line is decoded whole. A last line without a newline counts; a
 * byte-order mark before the first is dropped.
 */
export async function* readLines(
  input: AsyncIterable<Buffer | string> | Iterable<Buffer | string>,
): AsyncGenerator<Line> {
  let number = 0;
  let partial: Buffer[] = [];
  let partialBytes = 0;
  const line = (bytes: Buffer, newline: number): Line => {
    let text = bytes.toString('utf8');
    if (text.endsWith('\r')) text = text.slice(0, -1);
    if (number === 0 && text.startsWith('\uFEFF')) text = text.slice(1);
    return { number: ++number, text, bytes: bytes.length + newline };
  };
  for await (const piece of input) {
    const chunk = typeof piece === 'string' ? Buffer.from(piece, 'utf8') : piece;
    let start = 0;
    for (let end = chunk.indexOf(NEWLINE); end !== -1; end = chunk.indexOf(NEWLINE, start)) {
      const head = chunk.subarray(start, end);
      const whole = partial.length === 0 ? head : Buffer.concat([...partial, head], partialBytes + head.length);
      partial = [];
      partialBytes = 0;
      start = end + 1;
      yield line(whole, 1);
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      partial.push(rest);
      partialBytes += rest.length;
    }
  }
  if (partialBytes > 0) yield line(Buffer.concat(partial, partialBytes), 0);
}
