// Minimal types for the parts of oidc-provider 8.8.1 that test/helpers/oidc-provider.ts uses; the
// package ships none. Kept local (not @types/oidc-provider) so no dependency is added for a test
// helper. Named oidc-provider-types.d.ts rather than oidc-provider.d.ts because tsc silently skips a
// .d.ts whose base name matches a sibling .ts file in the include globs.
declare module "oidc-provider" {
  import type { IncomingMessage, ServerResponse } from "node:http";

  export type AdapterPayload = Record<string, unknown>;

  export interface Adapter {
    upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void>;
    find(id: string): Promise<AdapterPayload | undefined>;
    findByUserCode(userCode: string): Promise<AdapterPayload | undefined>;
    findByUid(uid: string): Promise<AdapterPayload | undefined>;
    consume(id: string): Promise<void>;
    destroy(id: string): Promise<void>;
    revokeByGrantId(grantId: string): Promise<void>;
  }

  export interface AdapterConstructor {
    new (model: string): Adapter;
  }

  export interface ClientMetadata {
    client_id: string;
    client_secret?: string;
    redirect_uris: string[];
    grant_types?: string[];
    response_types?: string[];
    token_endpoint_auth_method?: string;
    id_token_signed_response_alg?: string;
  }

  export interface Account {
    accountId: string;
    claims(use: string, scope: string): Record<string, unknown> | Promise<Record<string, unknown>>;
  }

  export class Grant {
    constructor(props: { accountId: string; clientId: string });
    readonly jti: string;
    accountId: string;
    clientId: string;
    addOIDCScope(scope: string): void;
    rejectOIDCScope(scope: string): void;
    getOIDCScope(): string;
    save(): Promise<string>;
    static find(id: string): Promise<Grant | undefined>;
  }

  export interface OIDCContext {
    readonly client: { clientId: string };
    readonly account?: { accountId: string };
    readonly session: { accountId?: string; grantIdFor(clientId: string): string | undefined };
    readonly result?: { consent?: { grantId?: string } };
    readonly requestParamOIDCScopes: Set<string>;
    readonly provider: Provider;
  }

  export interface KoaContextWithOIDC {
    oidc: OIDCContext;
    type: string;
    body: unknown;
    status: number;
  }

  export interface ErrorOut {
    error: string;
    error_description?: string;
  }

  export interface Interaction {
    uid: string;
    grantId?: string;
    prompt: { name: string; reasons: string[] };
    params: Record<string, unknown>;
    session?: { accountId?: string };
  }

  export interface InteractionResults {
    login?: { accountId: string };
    consent?: { grantId?: string };
    error?: string;
    error_description?: string;
  }

  export interface Configuration {
    adapter?: AdapterConstructor;
    clients?: ClientMetadata[];
    jwks?: { keys: object[] };
    cookies?: { keys?: string[] };
    scopes?: string[];
    claims?: Record<string, string[] | null>;
    conformIdTokenClaims?: boolean;
    features?: Record<string, { enabled: boolean }>;
    pkce?: { methods?: string[]; required?: (ctx: KoaContextWithOIDC, client: unknown) => boolean };
    ttl?: Record<string, number>;
    interactions?: { url?: (ctx: KoaContextWithOIDC, interaction: Interaction) => string | Promise<string> };
    findAccount?: (ctx: KoaContextWithOIDC, sub: string) => Account | undefined | Promise<Account | undefined>;
    loadExistingGrant?: (ctx: KoaContextWithOIDC) => Promise<Grant | undefined>;
    renderError?: (ctx: KoaContextWithOIDC, out: ErrorOut, error: Error) => void | Promise<void>;
    clientBasedCORS?: (ctx: KoaContextWithOIDC, origin: string, client: unknown) => boolean;
  }

  export class Provider {
    constructor(issuer: string, configuration?: Configuration);
    readonly issuer: string;
    readonly Grant: typeof Grant;
    callback(): (req: IncomingMessage, res: ServerResponse) => Promise<void>;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<Interaction>;
    interactionFinished(
      req: IncomingMessage,
      res: ServerResponse,
      result: InteractionResults,
      options?: { mergeWithLastSubmission?: boolean },
    ): Promise<void>;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }

  export default Provider;
}
