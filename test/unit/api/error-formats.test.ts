// The one mapping from an error to an answer (api/http/errors.ts errorResponse) in both formats:
// "plain" (the orchestrator's {code, message, ...}) and "with-error" (the console's and the secrets
// service's {error, code, message, ...}), for ApiError and its subclasses (docs/api-reference.md,
// "Errors"). Bodies are compared as text, so the key order is pinned too.
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { StoreUnavailableError } from "../../../adapters/store/errors.ts";
import { SsoError } from "../../../api/console/sso.ts";
import { badRequest, errorHandler, notAllowed, notFoundHandlerFor, unauthorized, type ErrorFormat } from "../../../api/http/index.ts";
import { SecretIntegrityError } from "../../../api/secrets/read.ts";
import { SealedError, VaultStateError } from "../../../api/secrets/vault.ts";
import { silentLogger } from "../../../runtime/log.ts";

function app(format: ErrorFormat, err: () => Error) {
  const a = new Hono();
  a.onError(errorHandler(silentLogger, format));
  a.notFound(notFoundHandlerFor(format));
  a.get("/x", () => {
    throw err();
  });
  return a;
}

async function answer(format: ErrorFormat, err: () => Error, path = "/x") {
  const res = await app(format, err).request(path);
  return { status: res.status, text: await res.text(), headers: res.headers };
}

describe("errorResponse", () => {
  it("plain: the body as is", async () => {
    expect(await answer("plain", () => notAllowed("InUse", "in use"))).toMatchObject({ status: 409, text: '{"code":"NotAllowed","reason":"InUse","message":"in use"}' });
    const bad = await answer("plain", () => badRequest("bad x", [{ path: "x", message: "bad" }]));
    expect(bad).toMatchObject({ status: 400, text: '{"code":"BadRequest","message":"bad x","details":[{"path":"x","message":"bad"}]}' });
    expect(await answer("plain", () => new Error("boom"), "/nowhere")).toMatchObject({ status: 404, text: '{"code":"NotFound","message":"no route for GET /nowhere"}' });
  });

  it("with-error: `error` (the message) first, then the plain body", async () => {
    const who = await answer("with-error", () => unauthorized("no token"));
    expect(who).toMatchObject({ status: 401, text: '{"error":"no token","code":"Unauthorized","message":"no token"}' });
    expect(who.headers.get("www-authenticate")).toBe('Bearer realm="capstan"');
    const down = await answer("with-error", () => new StoreUnavailableError("etcd"));
    expect(down).toMatchObject({ status: 503, text: '{"error":"the store did not answer in time; retry","code":"Unavailable","message":"the store did not answer in time; retry"}' });
    expect(down.headers.get("retry-after")).toBe("1");
    expect(await answer("with-error", () => new Error("boom"), "/nowhere")).toMatchObject({ status: 404, text: '{"error":"no route for GET /nowhere","code":"NotFound","message":"no route for GET /nowhere"}' });
  });

  it("the secrets service's errors", async () => {
    const sealed = await answer("with-error", () => new SealedError());
    expect(sealed).toMatchObject({ status: 503, text: '{"error":"sealed","code":"Unavailable","message":"sealed"}' });
    expect(sealed.headers.get("retry-after")).toBeNull();
    expect(await answer("with-error", () => new VaultStateError(409, "init", "already initialized"))).toMatchObject({
      status: 409,
      text: '{"error":"already initialized","code":"NotAllowed","message":"already initialized"}',
    });
    expect(await answer("with-error", () => new VaultStateError(400, "key", "wrong key"))).toMatchObject({
      status: 400,
      text: '{"error":"wrong key","code":"BadRequest","message":"wrong key","details":[{"path":"key","message":"wrong key"}]}',
    });
    const root = await answer("with-error", () => new VaultStateError(401, "access-token", "a valid root token is required"));
    expect(root.status).toBe(401);
    expect(root.headers.get("www-authenticate")).toBe('Bearer realm="capstan"');
    const broken = new SecretIntegrityError("a", "a.web.w", "p");
    expect(await answer("with-error", () => broken)).toMatchObject({ status: 500, text: JSON.stringify({ error: broken.message, code: "InternalError", message: broken.message }) });
    expect(new VaultStateError(409, "init", "x").field).toBe("init");
  });

  it("the console's single sign-on errors, with cache-control: no-store", async () => {
    const bad = await answer("with-error", () => new SsoError(400, "BadRequest", "code: spent", "code"));
    expect(bad).toMatchObject({ status: 400, text: '{"error":"code: spent","code":"BadRequest","message":"code: spent","details":[{"path":"code","message":"code: spent"}]}' });
    expect(bad.headers.get("cache-control")).toBe("no-store");
    const gateway = await answer("with-error", () => new SsoError(504, "GatewayTimeout", "slow"));
    expect(gateway).toMatchObject({ status: 504, text: '{"error":"slow","code":"GatewayTimeout","message":"slow"}' });
    expect(gateway.headers.get("cache-control")).toBe("no-store");
  });
});
