// A real OAuth 2.1 authorization server for the tests: node's oidc-provider
// (pinned in .ci/npm), issuing RS256 JWT access tokens by the client
// credentials grant, with the audience the resource indicator names
// (RFC 8707), and by an RFC 8693 token exchange grant registered on it.
// Usage: node idp.mjs NPM_DIR PORT CLIENTS_JSON
// CLIENTS_JSON is [{"client_id":..,"client_secret":..,"grant_types":[..]}]
// (grant_types defaults to client credentials; scope, if given, bounds the
// scopes the client may ask). GET /test/exchanges
// answers how many token exchanges it granted. It prints "listening"
// once it serves, and runs until killed. Each start makes a new signing
// key, under a new key id.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const [npmDir, port, clientsJSON] = process.argv.slice(2);
const lib = (p) => import(pathToFileURL(join(npmDir, 'node_modules/oidc-provider/lib', p)));
const { default: Provider } = await lib('index.js');
const { default: ResourceServer } = await lib('helpers/resource_server.js');
const errors = await lib('helpers/errors.js');
const { jwtVerify } = await import(pathToFileURL(join(npmDir, 'node_modules/jose/dist/webapi/index.js')));

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
// The scope a subject token carries when its subject lets a client act for
// it: the issuer's own policy of who may be delegated.
const DELEGATE = 'mcp:delegate';

const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const key = privateKey.export({ format: 'jwk' });
const issuer = `http://127.0.0.1:${port}`;
// Every resource is one the client may ask for: the audience is what it asked.
const resourceServer = (resource) => ({
  scope: `mcp ${DELEGATE}`,
  audience: resource,
  accessTokenTTL: 3600,
  accessTokenFormat: 'jwt',
  jwt: { sign: { alg: 'RS256' } },
});
const provider = new Provider(issuer, {
  clients: JSON.parse(clientsJSON).map(({ grant_types = ['client_credentials'], ...c }) => ({
    ...c,
    grant_types,
    redirect_uris: [],
    response_types: [],
    // The gateway authenticates its exchanges with HTTP Basic; callers post theirs.
    token_endpoint_auth_method: grant_types.includes(TOKEN_EXCHANGE) ? 'client_secret_basic' : 'client_secret_post',
  })),
  scopes: ['openid', 'offline_access', 'mcp', DELEGATE],
  // A key id of this start's own: a provider started again has rotated its key.
  jwks: { keys: [{ ...key, kid: `test-idp-${randomUUID()}`, alg: 'RS256', use: 'sig' }] },
  // An exchanged token says who acts for its subject (RFC 8693 section 4.1).
  extraTokenClaims: (ctx, token) => (token.gty === 'token-exchange' ? { act: { sub: token.clientId } } : undefined),
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      getResourceServerInfo: (ctx, resource) => resourceServer(resource),
    },
  },
});
provider.proxy = false;

// RFC 8693 token exchange: a subject token this issuer signed, still valid,
// exchanged by an authenticated client allowed the grant (the token
// endpoint checks both) for a JWT access token of the same subject, for
// the audience (or resource) asked, acting as the client; a subject whose
// token lacks the scope mcp:delegate is refused, with the reason.
let exchanges = 0;
provider.registerGrantType(TOKEN_EXCHANGE, async (ctx) => {
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== ACCESS_TOKEN) {
    throw new errors.InvalidRequest(`subject_token_type must be ${ACCESS_TOKEN}`);
  }
  if (params.requested_token_type && params.requested_token_type !== ACCESS_TOKEN) {
    throw new errors.InvalidRequest(`only ${ACCESS_TOKEN} can be issued`);
  }
  const target = params.resource || params.audience;
  if (!target) {
    throw new errors.InvalidTarget('a token exchange names its audience or resource');
  }
  let subject;
  try {
    ({ payload: subject } = await jwtVerify(params.subject_token, publicKey, { issuer, typ: 'at+jwt' }));
  } catch (err) {
    throw new errors.InvalidGrant(`the subject token is not a valid access token of this issuer: ${err.message}`);
  }
  if (!subject.sub) {
    throw new errors.InvalidGrant('the subject token names no subject');
  }
  if (!String(subject.scope ?? '').split(' ').includes(DELEGATE)) {
    throw new errors.CustomOIDCProviderError('invalid_grant', `the subject ${subject.sub} does not let a client act for it: its token lacks the scope ${DELEGATE}`);
  }
  const token = new provider.AccessToken({ accountId: subject.sub, client, gty: 'token-exchange', scope: 'mcp' });
  token.resourceServer = new ResourceServer(target, resourceServer(target));
  ctx.oidc.entity('AccessToken', token);
  const value = await token.save();
  exchanges += 1;
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN,
    token_type: 'Bearer',
    expires_in: token.expiration,
    scope: token.scope,
  };
}, ['audience', 'resource', 'scope', 'subject_token', 'subject_token_type', 'requested_token_type', 'actor_token', 'actor_token_type']);

provider.use(async (ctx, next) => {
  if (ctx.method === 'GET' && ctx.path === '/test/exchanges') {
    ctx.body = { exchanges };
    return;
  }
  await next();
});

const server = provider.listen(Number(port), '127.0.0.1', () => console.log('listening'));
process.on('SIGTERM', () => { server.close(() => process.exit(0)); server.closeAllConnections(); });
