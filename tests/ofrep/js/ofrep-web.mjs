// Drives @openfeature/ofrep-web-provider against a running flagsight server.
// Usage: node ofrep-web.mjs '<json>' with {baseUrl, apiKey, context, flags: [keys]}.
// Prints one JSON object: the initialization error (if any), each flag's resolution details,
// every HTTP exchange the provider made, and the details again after the same context is set
// once more (which makes the provider revalidate its bulk answer with If-None-Match).
import { OpenFeature } from '@openfeature/web-sdk';
import { OFREPWebProvider } from '@openfeature/ofrep-web-provider';

const { baseUrl, apiKey, context, flags } = JSON.parse(process.argv[2]);
const exchanges = [];

async function recordingFetch(request, init) {
  const response = await fetch(request, init);
  exchanges.push({
    method: request.method,
    path: new URL(request.url).pathname,
    authorization: request.headers.get('Authorization'),
    ifNoneMatch: request.headers.get('If-None-Match'),
    status: response.status,
    etag: response.headers.get('ETag'),
    retryAfter: response.headers.get('Retry-After'),
  });
  return response;
}

function details(client) {
  const out = {};
  for (const flag of flags) {
    const d = client.getBooleanDetails(flag, true);
    out[flag] = {
      value: d.value,
      reason: d.reason,
      variant: d.variant ?? null,
      errorCode: d.errorCode ?? null,
      errorMessage: d.errorMessage ?? null,
      evaluationId: d.flagMetadata?.evaluationId ?? null,
    };
  }
  return out;
}

const provider = new OFREPWebProvider({
  baseUrl,
  cacheMode: 'disabled',
  headers: [['Authorization', `ApiKey ${apiKey}`]],
  fetchImplementation: recordingFetch,
  timeoutMs: 5000,
});

let initError = null;
await OpenFeature.setContext(context);
try {
  await OpenFeature.setProviderAndWait(provider);
} catch (error) {
  initError = { name: error?.name ?? null, message: String(error?.message ?? error), code: error?.code ?? null };
}
const client = OpenFeature.getClient();
const first = details(client);
await OpenFeature.setContext({ ...context });
const afterRefresh = details(client);
await OpenFeature.close();
process.stdout.write(JSON.stringify({ initError, first, afterRefresh, exchanges }));
