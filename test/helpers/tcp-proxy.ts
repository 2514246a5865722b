// A TCP proxy a test controls, to cut one process off from a server without touching either
// (docs/high-availability.md: a deposed orchestrator). It listens on a free loopback port and
// forwards every connection to `target`.
//
//   const proxy = await startTcpProxy("127.0.0.1:2379");
//   // give the process proxy.endpoint instead of the target
//   proxy.blackhole();   // bytes stop flowing both ways; no connection is closed or reset
//   proxy.restore();     // what was held back is delivered, in order, and forwarding resumes
//   await proxy.close();
//
// A black hole is a network partition as TCP sees it: the sender's writes succeed (into buffers),
// nothing arrives, nothing fails until the sender's own timeouts fire. New connections are accepted
// but not connected onward until restore(). On restore the held bytes go out first, as TCP would
// retransmit them once the path heals: a request sent during the partition reaches the server late.
import { createConnection, createServer, type Server, type Socket } from "node:net";

export interface TcpProxy {
  /** host:port to give the client instead of the target. */
  endpoint: string;
  blackhole(): void;
  restore(): void;
  isBlackholed(): boolean;
  /** Connections accepted so far. */
  connections(): number;
  /** Close the listener and every connection. */
  close(): Promise<void>;
}

/** One direction of one connection: data is written on, or held while black-holed. */
class Pipe {
  private held: Buffer[] = [];
  private ended = false;
  constructor(
    private readonly to: () => Socket | undefined,
    private readonly blocked: () => boolean,
  ) {}

  push(chunk: Buffer): void {
    const to = this.to();
    if (this.blocked() || !to || this.held.length > 0) this.held.push(chunk);
    else to.write(chunk);
  }

  end(): void {
    this.ended = true;
    this.flush();
  }

  flush(): void {
    const to = this.to();
    if (this.blocked() || !to) return;
    for (const chunk of this.held) to.write(chunk);
    this.held = [];
    if (this.ended) to.end();
  }
}

export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const i = target.lastIndexOf(":");
  const host = target.slice(0, i);
  const port = Number(target.slice(i + 1));
  let blackholed = false;
  let accepted = 0;
  const sockets = new Set<Socket>();
  const pending: (() => void)[] = [];
  const flushers = new Set<() => void>();

  const server: Server = createServer((client) => {
    accepted++;
    sockets.add(client);
    let upstream: Socket | undefined;
    const toUpstream = new Pipe(() => upstream, () => blackholed);
    const toClient = new Pipe(() => client, () => blackholed);
    const flush = () => {
      toUpstream.flush();
      toClient.flush();
    };
    flushers.add(flush);
    const closeBoth = () => {
      flushers.delete(flush);
      client.destroy();
      upstream?.destroy();
    };
    client.on("data", (c: Buffer) => toUpstream.push(c));
    client.on("end", () => toUpstream.end());
    client.on("error", () => {});
    // A client that gives up while black-holed is not told to the server until restore(), as a
    // partition would hide its FIN too; a reset (destroy) closes both sides at once.
    client.on("close", () => {
      sockets.delete(client);
      if (!blackholed) closeBoth();
    });
    const connect = () => {
      const up = createConnection({ host, port });
      upstream = up;
      sockets.add(up);
      up.on("connect", flush);
      up.on("data", (c: Buffer) => toClient.push(c));
      up.on("end", () => toClient.end());
      up.on("error", () => {});
      up.on("close", () => {
        sockets.delete(up);
        if (!blackholed) closeBoth();
      });
    };
    if (blackholed) pending.push(connect);
    else connect();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("tcp proxy: no address");

  return {
    endpoint: `127.0.0.1:${address.port}`,
    blackhole() {
      blackholed = true;
    },
    restore() {
      blackholed = false;
      for (const connect of pending.splice(0)) connect();
      for (const flush of [...flushers]) flush();
    },
    isBlackholed: () => blackholed,
    connections: () => accepted,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
