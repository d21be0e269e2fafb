// A real OAuth 2.1 authorization server for the scale-out test: node's
// oidc-provider (pinned in .ci/npm), issuing RS256 JWT access tokens by the
// client credentials grant, with the audience the resource indicator names
// (RFC 8707). Usage: node idp.mjs NPM_DIR PORT CLIENTS_JSON
// CLIENTS_JSON is [{"client_id":..,"client_secret":..}]. It prints
// "listening" once it serves, and runs until killed.
import { generateKeyPairSync } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const [npmDir, port, clientsJSON] = process.argv.slice(2);
const { default: Provider } = await import(pathToFileURL(join(npmDir, 'node_modules/oidc-provider/lib/index.js')));

const key = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
const issuer = `http://127.0.0.1:${port}`;
const provider = new Provider(issuer, {
  clients: JSON.parse(clientsJSON).map((c) => ({
    ...c,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_post',
  })),
  jwks: { keys: [{ ...key, kid: 'scale-test', alg: 'RS256', use: 'sig' }] },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // Every resource is the gateway: the audience is what the client asked for.
      getResourceServerInfo: (ctx, resource) => ({
        scope: 'mcp',
        audience: resource,
        accessTokenTTL: 3600,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
});
provider.proxy = false;
const server = provider.listen(Number(port), '127.0.0.1', () => console.log('listening'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
