// Listen addresses as Go programs take them: ":9000" (every interface), "127.0.0.1:9000",
// "[::1]:9000", "localhost:0" (any free port).

export interface ListenAddress {
  host: string;
  port: number;
}

export function parseListenAddress(text: string, option = "-web"): ListenAddress {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(text.trim());
  if (!m) throw new Error(`${option}: "${text}" is not an address of the form [HOST]:PORT, e.g. :9000 or 127.0.0.1:9000`);
  const port = Number(m[3]);
  if (port > 65535) throw new Error(`${option}: port ${port} is out of range`);
  const host = m[1] ?? m[2] ?? "";
  return { host: host === "" ? "0.0.0.0" : host, port };
}
