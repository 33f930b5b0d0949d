import { connect, type Socket } from 'node:net';

/**
 * A request whose body never finishes: the graceful stop waits for it. Resolves once the node
 * has read its headers (it answers `Expect: 100-continue` then) and the first bytes of its
 * body are sent: from then on the request is in flight, not a connection still opening.
 */
export async function stuckRequest(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  const continued = new Promise<void>((resolve, reject) => {
    // not a wait: the bound on how long the node may take to read the headers
    const timer = setTimeout(() => reject(new Error('the node did not read the stuck request within 10 s')), 10_000);
    let answer = '';
    const onData = (chunk: Buffer): void => {
      answer += chunk.toString('latin1');
      if (!answer.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      clearTimeout(timer);
      if (answer.startsWith('HTTP/1.1 100')) resolve();
      else reject(new Error(`the node answered the stuck request's headers with ${JSON.stringify(answer)}`));
    };
    socket.on('data', onData);
  });
  socket.write(
    `POST /api/tasks HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\ncontent-length: 100\r\nexpect: 100-continue\r\n\r\n`,
  );
  await continued;
  socket.write('{"task');
  return socket;
}
