// The test proxy the high-availability tests cut an orchestrator off from etcd with
// (test/helpers/tcp-proxy.ts): it forwards both ways; black-holed, it delivers nothing and closes
// nothing; restored, it delivers what it held, in order, and forwards again.
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pollUntil } from "../../helpers/poll.ts";
import { startTcpProxy, type TcpProxy } from "../../helpers/tcp-proxy.ts";

describe("tcp proxy", () => {
  let echo: Server;
  let proxy: TcpProxy;
  const received: string[] = [];

  beforeAll(async () => {
    // Echoes every chunk back upper-cased, and remembers it.
    echo = createServer((s) => s.on("data", (d: Buffer) => (received.push(d.toString()), s.write(d.toString().toUpperCase()))));
    await new Promise<void>((r) => echo.listen(0, "127.0.0.1", () => r()));
    const { port } = echo.address() as { port: number };
    proxy = await startTcpProxy(`127.0.0.1:${port}`);
  });

  afterAll(async () => {
    await proxy.close();
    await new Promise((r) => echo.close(r));
  });

  const connect = async (): Promise<{ socket: Socket; text: () => string; closed: () => boolean }> => {
    const [host, port] = proxy.endpoint.split(":") as [string, string];
    const socket = createConnection({ host, port: Number(port) });
    let text = "";
    let closed = false;
    socket.on("data", (d: Buffer) => (text += d.toString()));
    socket.on("close", () => (closed = true));
    await new Promise((r) => socket.once("connect", r));
    return { socket, text: () => text, closed: () => closed };
  };

  it("forwards both ways, holds everything while black-holed without closing, and delivers it in order on restore", async () => {
    const client = await connect();
    client.socket.write("a");
    await pollUntil("the echo of a", async () => client.text() === "A", 5_000, 10);

    proxy.blackhole();
    client.socket.write("b");
    client.socket.write("c");
    // A connection opened during the black hole is accepted but not connected onward.
    const late = await connect();
    late.socket.write("d");
    // Nothing arrives while the hole lasts (the echo would have come back within milliseconds).
    await new Promise((r) => setTimeout(r, 300));
    expect(received.join("")).toBe("a");
    expect(client.text()).toBe("A");
    expect(client.closed() || late.closed()).toBe(false);

    proxy.restore();
    await pollUntil("the held bytes to arrive", async () => client.text() === "ABC" && late.text() === "D", 5_000, 10);
    // Each connection's bytes in order (the echoes above); the two connections in any order.
    expect([...received.join("")].sort().join("")).toBe("abcd");
    expect(proxy.connections()).toBe(2);
    client.socket.destroy();
    late.socket.destroy();
  });
});
