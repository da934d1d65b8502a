#!/usr/bin/env node
// A reverse proxy in front of the tests' S3 server that makes it fail as a store or a network
// fails (tests/storage/s3_test_server.h, S3Fault and S3Traffic). Plain Node, no packages.
//
// Usage: node fault_proxy.js UPSTREAM_URL [PORT]
// Listens on 127.0.0.1:PORT (0, the default: a free port) and prints
// "fault proxy listening on 127.0.0.1:PORT" once it accepts connections. Every request is
// forwarded to UPSTREAM_URL as it came (method, path, headers, Host included, so signatures stay
// valid), bodies streamed both ways, unless a fault matches it. The control API, never forwarded:
//   POST   /__dcpp_test/faults   adds a fault (a JSON S3Fault; faults apply in the order added)
//   DELETE /__dcpp_test/faults   removes every fault
//   GET    /__dcpp_test/traffic  the counts since the last reset (a JSON S3Traffic; most_in_flight
//                                 is the most requests held at once)
//   DELETE /__dcpp_test/traffic  resets them
// It checks every request's Content-MD5, as S3 does and s3rver does not: a body whose digest
// differs is answered 400 BadDigest and not forwarded (counted as bad_digests). And it honours a
// PUT's `If-None-Match: *` as S3 does and s3rver does not: it asks s3rver whether the object
// exists (a HEAD with the request's own credentials; s3rver checks only the key id), answers
// 412 PreconditionFailed when it does, and forwards the PUT otherwise; such PUTs of one key are
// handled one at a time.
// A fault may also stall a request (accept it, read its body, never answer) or flip a bit of its
// answer's body (bytes changed on the way back), and faults apply to
// the credential endpoints below as to the store. A PUT with `If-Match: ETAG` is honoured as S3
// does: 412 PreconditionFailed unless the object exists with that entity tag.
// It checks S3's flexible checksums as S3 does and s3rver does not: a PUT (an object or a part)
// with x-amz-checksum-crc32c is refused 400 BadDigest when the body's CRC-32C differs (counted in
// bad_digests), and otherwise forwarded and answered with the checksum (counted as
// crc32c_checked); a CreateMultipartUpload with x-amz-checksum-algorithm: CRC32C is answered with
// that header. POST /__dcpp_test/checksums {"crc32c": false} makes it ignore them, as s3rver and
// older S3-compatible stores do (true again by default after every reset of the faults).
// It keeps the multipart uploads in progress that pass through it, and answers
// ListMultipartUploads (GET /bucket?uploads) and AbortMultipartUpload (DELETE ...?uploadId=, 204)
// from them, as S3 does and s3rver does not (it answers NotImplemented and 405).
// It also plays the credential endpoints that the AWS SDKs ask (s3_credentials.h), under
// /__dcpp_credentials/: STS (`sts/`, AssumeRoleWithWebIdentity for the token
// "dcpp-web-identity-token"), EC2's instance metadata (`imds/latest/...`, IMDSv2) and a
// container's endpoint (`container`, Authorization "dcpp-container-token"). Each answer gives the
// key pair the S3 server accepts with a new session token ("token-<n>"), expiring after
// `credentials_ttl_seconds` (POST /__dcpp_test/credentials {"ttl_seconds": N}; default 3600).

'use strict';

const crypto = require('crypto');
const http = require('http');

const CONTROL_PREFIX = '/__dcpp_test/';
// Hop-by-hop headers: they describe one connection, not the message, so they are not forwarded.
// (Expect too: this server has already answered "100 Continue" to the client.)
const REQUEST_HOP_HEADERS = ['connection', 'keep-alive', 'proxy-connection', 'te', 'upgrade',
                             'trailer', 'expect'];
const RESPONSE_HOP_HEADERS = ['connection', 'keep-alive', 'proxy-connection', 'upgrade',
                              'trailer'];

const upstream = new URL(process.argv[2] || '');
const listenPort = Number(process.argv[3] || 0);
// A fresh upstream connection per request: no stale pooled connection for the server to reset.
const upstreamAgent = new http.Agent({keepAlive: false});

let faults = [];
let checksCrc32c = true;

// CRC-32C (Castagnoli, reflected 0x82F63B78) of a Buffer, as S3's x-amz-checksum-crc32c: base64
// of its four bytes, most significant first.
const CRC32C_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = (c & 1) ? (0x82F63B78 ^ (c >>> 1)) : (c >>> 1);
    table[n] = c >>> 0;
  }
  return table;
})();
function crc32cBase64(body) {
  let crc = 0xFFFFFFFF;
  for (let i = 0; i < body.length; i++) crc = CRC32C_TABLE[(crc ^ body[i]) & 0xFF] ^ (crc >>> 8);
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE((crc ^ 0xFFFFFFFF) >>> 0);
  return bytes.toString('base64');
}
let traffic;
function resetTraffic() {
  traffic = {requests: 0, faults: 0, get_body_bytes: 0, put_body_bytes: 0, ranged_gets: 0,
             aborted_uploads: 0, most_in_flight: 0, credentials_issued: 0, bad_digests: 0,
             crc32c_checked: 0, content_md5_sent: 0,
             gets_by_name: {},
             last_security_token: ''};
}
resetTraffic();

function normalizeFault(f) {
  return {
    method: String(f.method || '').toUpperCase(),
    path_contains: String(f.path_contains || ''),
    times: Number(f.times === undefined ? 1 : f.times),
    status: Number(f.status || 0),
    code: String(f.code || 'InternalError'),
    drop_request_after_bytes: Number(f.drop_request_after_bytes || 0),
    drop_response_after_bytes: Number(f.drop_response_after_bytes || 0),
    retry_after_seconds: Number(f.retry_after_seconds === undefined ? -1 : f.retry_after_seconds),
    corrupt_request_body: Boolean(f.corrupt_request_body),
    stall: Boolean(f.stall),
    corrupt_response_body: Boolean(f.corrupt_response_body),
  };
}

// The first fault that matches the request, spent by one; null when none does.
function takeFault(req) {
  const i = faults.findIndex((f) => (f.method === '' || f.method === req.method) &&
                                    (f.path_contains === '' || req.url.includes(f.path_contains)));
  if (i < 0) return null;
  const fault = faults[i];
  if (--fault.times <= 0) faults.splice(i, 1);
  return fault;
}

// A reset (RST), as a network failure looks, where Node can send one; else a plain close.
function resetConnection(socket) {
  if (typeof socket.resetAndDestroy === 'function') {
    socket.resetAndDestroy();
  } else {
    socket.destroy();
  }
}

function xmlEscape(text) {
  return text.replace(/[<>&'"]/g, (c) => ({'<': '&lt;', '>': '&gt;', '&': '&amp;', '\'': '&apos;',
                                            '"': '&quot;'})[c]);
}

function readJson(req, done) {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    try {
      done(null, JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}'));
    } catch (e) {
      done(e);
    }
  });
}

function reply(res, status, body, type) {
  res.writeHead(status, {'Content-Type': type, 'Content-Length': Buffer.byteLength(body)});
  res.end(body);
}

function handleControl(req, res) {
  const what = req.url.slice(CONTROL_PREFIX.length).split('?')[0];
  if (what === 'faults' && req.method === 'POST') {
    readJson(req, (err, fault) => {
      if (err) return reply(res, 400, String(err) + '\n', 'text/plain');
      faults.push(normalizeFault(fault));
      reply(res, 200, '{}', 'application/json');
    });
  } else if (what === 'faults' && req.method === 'DELETE') {
    faults = [];
    for (const socket of stalled) socket.destroy();
    stalled.clear();
    checksCrc32c = true;
    req.resume();
    reply(res, 200, '{}', 'application/json');
  } else if (what === 'traffic' && req.method === 'GET') {
    req.resume();
    reply(res, 200, JSON.stringify(traffic), 'application/json');
  } else if (what === 'checksums' && req.method === 'POST') {
    readJson(req, (err, settings) => {
      if (err) return reply(res, 400, String(err) + '\n', 'text/plain');
      checksCrc32c = settings.crc32c !== false;
      reply(res, 200, '{}', 'application/json');
    });
  } else if (what === 'credentials' && req.method === 'POST') {
    readJson(req, (err, settings) => {
      if (err) return reply(res, 400, String(err) + '\n', 'text/plain');
      credentialsTtlSeconds = Number(settings.ttl_seconds || 3600);
      reply(res, 200, '{}', 'application/json');
    });
  } else if (what === 'traffic' && req.method === 'DELETE') {
    resetTraffic();
    req.resume();
    reply(res, 200, '{}', 'application/json');
  } else {
    req.resume();
    reply(res, 404, 'no such control call: ' + req.method + ' ' + req.url + '\n', 'text/plain');
  }
}

// Answers with an S3 error, after reading the request's body (so the client sees the answer, not
// a connection reset by a server that stopped reading).
function answerWithError(req, res, fault) {
  req.resume();
  req.on('end', () => {
    const body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>' + xmlEscape(fault.code) +
                 '</Code><Message>injected by the test proxy</Message></Error>';
    const headers = {'Content-Type': 'application/xml', 'Content-Length': Buffer.byteLength(body)};
    if (fault.retry_after_seconds >= 0) headers['Retry-After'] = String(fault.retry_after_seconds);
    res.writeHead(fault.status, headers);
    res.end(body);
  });
}

// The connections of stalled requests: held, never answered, until the client gives up or the
// faults are cleared.
const stalled = new Set();

// Accepts the request, reads its body and never answers: a store that hangs.
function stall(req) {
  req.resume();
  stalled.add(req.socket);
  req.socket.on('close', () => stalled.delete(req.socket));
}

// Reads `limit` bytes of the request's body (all of it, when shorter), then resets the connection.
function dropRequest(req, limit) {
  let read = 0;
  let dropped = false;
  const drop = () => {
    if (!dropped) {
      dropped = true;
      resetConnection(req.socket);
    }
  };
  req.on('data', (chunk) => {
    read += chunk.length;
    if (read >= limit) drop();
  });
  req.on('end', drop);
}

// Forwards the request upstream; with `dropResponseAfter` > 0, sends the response's status and
// headers and only that many bytes of its body, then resets the connection.
function forward(req, res, dropResponseAfter, corruptBody, corruptResponse) {
  // What S3 adds to a successful answer when it checked a flexible checksum.
  let checksumAnswer = null;
  if (checksCrc32c && req.method === 'PUT' && req.headers['x-amz-checksum-crc32c'] !== undefined) {
    checksumAnswer = {'x-amz-checksum-crc32c': req.headers['x-amz-checksum-crc32c']};
  } else if (checksCrc32c && req.method === 'POST' && queryOf(req.url).has('uploads') &&
             req.headers['x-amz-checksum-algorithm'] === 'CRC32C') {
    checksumAnswer = {'x-amz-checksum-algorithm': 'CRC32C'};
  }
  const headers = Object.assign({}, req.headers);
  for (const h of REQUEST_HOP_HEADERS) delete headers[h];
  const isGet = req.method === 'GET';
  if (isGet && headers.range !== undefined) traffic.ranged_gets++;
  const countsBody = req.method === 'PUT' || req.method === 'POST';

  const upReq = http.request({
    host: upstream.hostname,
    port: upstream.port,
    method: req.method,
    path: req.url,
    headers,
    agent: upstreamAgent,
    setHost: false,
  });
  upReq.on('error', (err) => {
    if (!res.headersSent) {
      reply(res, 502, 'upstream: ' + err.message + '\n', 'text/plain');
    } else {
      resetConnection(req.socket);
    }
  });
  upReq.on('response', (upRes) => {
    const resHeaders = Object.assign({}, upRes.headers);
    for (const h of RESPONSE_HOP_HEADERS) delete resHeaders[h];
    if (upRes.statusCode === 200 && checksumAnswer !== null) Object.assign(resHeaders, checksumAnswer);
    res.writeHead(upRes.statusCode, upRes.statusMessage, resHeaders);
    const query = queryOf(req.url);
    if (req.method === 'POST' && upRes.statusCode === 200 && query.has('uploadId')) {
      uploads.delete(query.get('uploadId'));  // completed
    }
    if (req.method === 'POST' && upRes.statusCode === 200 && query.has('uploads') &&
        dropResponseAfter <= 0) {  // begun: its id is in the answer
      const chunks = [];
      upRes.on('data', (chunk) => chunks.push(chunk));
      upRes.on('end', () => {
        const body = Buffer.concat(chunks);
        const id = /<UploadId>([^<]*)<\/UploadId>/.exec(body.toString('utf8'));
        if (id) uploads.set(id[1], bucketAndKey(req.url));
        res.end(body);
      });
      return;
    }
    if (dropResponseAfter <= 0 && corruptResponse) {
      // One bit flipped in the middle of the body's first bytes (the length kept).
      let flippedAnswer = false;
      upRes.on('data', (chunk) => {
        if (isGet) traffic.get_body_bytes += chunk.length;
        if (!flippedAnswer && chunk.length > 0) {
          chunk = Buffer.from(chunk);
          chunk[Math.floor(chunk.length / 2)] ^= 0x10;
          flippedAnswer = true;
        }
        res.write(chunk);
      });
      upRes.on('end', () => res.end());
      return;
    }
    if (dropResponseAfter <= 0) {
      if (isGet) upRes.on('data', (chunk) => (traffic.get_body_bytes += chunk.length));
      upRes.pipe(res);
      return;
    }
    let sent = 0;
    let dropped = false;
    const drop = () => {
      if (dropped) return;
      dropped = true;
      upRes.destroy();
      // Flushes what was written (the headers at least), then resets.
      res.write('', () => resetConnection(req.socket));
    };
    upRes.on('data', (chunk) => {
      if (dropped) return;
      const part = chunk.subarray(0, Math.max(0, dropResponseAfter - sent));
      sent += part.length;
      if (isGet) traffic.get_body_bytes += part.length;
      if (part.length > 0) res.write(part);
      if (sent >= dropResponseAfter) drop();
    });
    upRes.on('end', drop);
  });

  if (countsBody) req.on('data', (chunk) => (traffic.put_body_bytes += chunk.length));
  // A client that goes away mid-request takes the upstream request with it.
  req.on('aborted', () => upReq.destroy());
  res.on('close', () => {
    if (!res.writableFinished) upReq.destroy();
  });
  const contentMd5 = req.headers['content-md5'];
  const crc32c = checksCrc32c && req.method === 'PUT' ? req.headers['x-amz-checksum-crc32c']
                                                       : undefined;
  if (contentMd5 !== undefined) traffic.content_md5_sent++;
  if (!corruptBody && contentMd5 === undefined && crc32c === undefined) return req.pipe(upReq);
  // The body whole: one bit of its first byte flipped on the way (the length kept) with
  // corruptBody; checked against its Content-MD5 as S3 checks it (s3rver does not), a mismatch
  // answered 400 BadDigest and not forwarded.
  const chunks = [];
  let flipped = !corruptBody;
  req.on('data', (chunk) => {
    if (!flipped && chunk.length > 0) {
      chunk = Buffer.from(chunk);
      chunk[0] ^= 1;
      flipped = true;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    if (contentMd5 !== undefined &&
        crypto.createHash('md5').update(body).digest('base64') !== contentMd5) {
      upReq.destroy();
      traffic.bad_digests++;
      return reply(res, 400, '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>BadDigest' +
                   '</Code><Message>The Content-MD5 you specified did not match what we ' +
                   'received.</Message></Error>', 'application/xml');
    }
    if (crc32c !== undefined) {
      if (crc32cBase64(body) !== crc32c) {
        upReq.destroy();
        traffic.bad_digests++;
        return reply(res, 400, '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>BadDigest' +
                     '</Code><Message>The CRC32C you specified did not match the calculated ' +
                     'checksum.</Message></Error>', 'application/xml');
      }
      traffic.crc32c_checked++;
    }
    upReq.end(body);
  });
}

const CREDENTIALS_PREFIX = '/__dcpp_credentials/';
const IMDS_SESSION = 'dcpp-imds-session';
let credentialsTtlSeconds = 3600;

function issueCredentials() {
  traffic.credentials_issued++;
  return {
    AccessKeyId: 'S3RVER',
    SecretAccessKey: 'S3RVER',
    Token: 'token-' + traffic.credentials_issued,
    Expiration: new Date(Date.now() + credentialsTtlSeconds * 1000).toISOString(),
  };
}

// The credential endpoints (the header comment); the body is read whole first.
function handleCredentials(req, res) {
  const path = req.url.slice(CREDENTIALS_PREFIX.length);
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    if (path.startsWith('sts') && req.method === 'POST') {
      const form = new URLSearchParams(body);
      if (form.get('Action') !== 'AssumeRoleWithWebIdentity' ||
          form.get('WebIdentityToken') !== 'dcpp-web-identity-token' || !form.get('RoleArn')) {
        return reply(res, 400, '<ErrorResponse><Error><Code>InvalidIdentityToken</Code>' +
                     '</Error></ErrorResponse>', 'text/xml');
      }
      const c = issueCredentials();
      return reply(res, 200, '<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>' +
                   '<Credentials><AccessKeyId>' + c.AccessKeyId + '</AccessKeyId><SecretAccessKey>' +
                   c.SecretAccessKey + '</SecretAccessKey><SessionToken>' + c.Token +
                   '</SessionToken><Expiration>' + c.Expiration + '</Expiration></Credentials>' +
                   '</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>',
                   'text/xml');
    }
    if (path === 'imds/latest/api/token' && req.method === 'PUT') {
      return reply(res, 200, IMDS_SESSION, 'text/plain');
    }
    const role = 'imds/latest/meta-data/iam/security-credentials/';
    if (path.startsWith(role) && req.method === 'GET') {
      if (req.headers['x-aws-ec2-metadata-token'] !== IMDS_SESSION) {
        return reply(res, 401, '', 'text/plain');
      }
      if (path === role) return reply(res, 200, 'dcpp-role', 'text/plain');
      const c = issueCredentials();
      return reply(res, 200, JSON.stringify(Object.assign({Code: 'Success'}, c)),
                   'application/json');
    }
    if (path === 'container' && req.method === 'GET') {
      if (req.headers.authorization !== 'dcpp-container-token') {
        return reply(res, 403, '{"message":"bad token"}', 'application/json');
      }
      return reply(res, 200, JSON.stringify(issueCredentials()), 'application/json');
    }
    reply(res, 404, 'no such credential endpoint: ' + req.method + ' ' + req.url + '\n',
          'text/plain');
  });
}

// The conditional PUTs in progress, by path: each waits for the one before it.
const conditionalPuts = new Map();

// A conditional PUT (If-None-Match: *, or If-Match: ETAG; see the header comment): `holds`
// tells from s3rver's answer to a HEAD of the object whether its condition holds; `proceed`
// forwards it.
function conditionalPut(req, res, holds, proceed) {
  const path = req.url.split('?')[0];
  const before = conditionalPuts.get(path) || Promise.resolve();
  const turn = before.then(() => new Promise((done) => {
    const headers = {};
    for (const h of ['authorization', 'x-amz-date', 'x-amz-content-sha256',
                     'x-amz-security-token', 'host']) {
      if (req.headers[h] !== undefined) headers[h] = req.headers[h];
    }
    const head = http.request({host: upstream.hostname, port: upstream.port, method: 'HEAD',
                               path, headers, agent: upstreamAgent, setHost: false});
    head.on('error', () => {
      reply(res, 502, 'upstream HEAD failed\n', 'text/plain');
      done();
    });
    head.on('response', (headRes) => {
      headRes.resume();
      if (!holds(headRes)) {
        req.resume();
        reply(res, 412, '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>' +
              'PreconditionFailed</Code><Message>At least one of the pre-conditions you ' +
              'specified did not hold</Message></Error>', 'application/xml');
        return done();
      }
      res.on('close', done);
      proceed();
    });
    head.end();
  }));
  conditionalPuts.set(path, turn);
  turn.then(() => {
    if (conditionalPuts.get(path) === turn) conditionalPuts.delete(path);
  });
}

// The multipart uploads begun through the proxy and not completed or aborted: upload id to
// {bucket, key} (path-style URLs).
const uploads = new Map();

function bucketAndKey(url) {
  const path = url.split('?')[0].slice(1);
  const slash = path.indexOf('/');
  return slash < 0 ? {bucket: decodeURIComponent(path), key: ''}
                   : {bucket: decodeURIComponent(path.slice(0, slash)),
                      key: decodeURIComponent(path.slice(slash + 1))};
}

function queryOf(url) {
  return new URLSearchParams(url.includes('?') ? url.slice(url.indexOf('?') + 1) : '');
}

// ListMultipartUploads and AbortMultipartUpload, answered here; true when `req` was one.
function handleUploads(req, res) {
  const query = queryOf(req.url);
  const {bucket, key} = bucketAndKey(req.url);
  if (req.method === 'GET' && key === '' && query.has('uploads')) {
    const prefix = query.get('prefix') || '';
    let body = '<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult><Bucket>' +
               xmlEscape(bucket) + '</Bucket><IsTruncated>false</IsTruncated>';
    for (const [id, upload] of uploads) {
      if (upload.bucket === bucket && upload.key.startsWith(prefix)) {
        body += '<Upload><Key>' + xmlEscape(upload.key) + '</Key><UploadId>' + xmlEscape(id) +
                '</UploadId></Upload>';
      }
    }
    req.resume();
    reply(res, 200, body + '</ListMultipartUploadsResult>', 'application/xml');
    return true;
  }
  if (req.method === 'DELETE' && query.has('uploadId')) {
    uploads.delete(query.get('uploadId'));
    req.resume();
    res.writeHead(204);
    res.end();
    return true;
  }
  return false;
}

// Requests received and not yet answered (their responses not finished or closed).
let inFlight = 0;

const server = http.createServer((req, res) => {
  if (req.url.startsWith(CONTROL_PREFIX)) return handleControl(req, res);
  if (req.url.startsWith(CREDENTIALS_PREFIX)) {
    // The credential endpoints fail as the store does, by the same faults (path_contains
    // "__dcpp_credentials/sts", ".../imds", ".../container").
    const fault = takeFault(req);
    if (fault === null) return handleCredentials(req, res);
    traffic.faults++;
    if (fault.stall) return stall(req);
    return answerWithError(req, res, fault);
  }
  traffic.requests++;
  traffic.last_security_token = req.headers['x-amz-security-token'] || '';
  if (req.method === 'GET') {
    const name = req.url.split('?')[0].split('/').pop();
    traffic.gets_by_name[name] = (traffic.gets_by_name[name] || 0) + 1;
  }
  inFlight++;
  traffic.most_in_flight = Math.max(traffic.most_in_flight, inFlight);
  let counted = true;
  const done = () => {
    if (counted) {
      counted = false;
      inFlight--;
    }
  };
  res.on('finish', done);
  res.on('close', done);
  if (req.method === 'DELETE' && req.url.includes('uploadId=')) traffic.aborted_uploads++;
  if (req.method === 'PUT' && req.headers['if-none-match'] === '*') {
    delete req.headers['if-none-match'];  // s3rver ignores it; decided here
    return conditionalPut(req, res, (head) => head.statusCode !== 200, () => handle(req, res));
  }
  if (req.method === 'PUT' && req.headers['if-match'] !== undefined) {
    const etag = req.headers['if-match'];
    delete req.headers['if-match'];
    return conditionalPut(req, res, (head) => head.statusCode === 200 && head.headers.etag === etag,
                          () => handle(req, res));
  }
  handle(req, res);
});

// A request of the S3 API: a fault's, answered here (uploads), or forwarded.
function handle(req, res) {
  const fault = takeFault(req);
  if (fault === null && handleUploads(req, res)) return;
  if (fault === null) return forward(req, res, 0, false, false);
  traffic.faults++;
  console.log('fault: ' + JSON.stringify(fault) + ' on ' + req.method + ' ' + req.url);
  if (fault.stall) return stall(req);
  if (fault.status !== 0) return answerWithError(req, res, fault);
  if (fault.drop_request_after_bytes > 0) return dropRequest(req, fault.drop_request_after_bytes);
  return forward(req, res, fault.drop_response_after_bytes, fault.corrupt_request_body,
                 fault.corrupt_response_body);
}
// The tests bound their requests themselves; a slow transfer must not be cut by the proxy.
server.requestTimeout = 0;
server.headersTimeout = 0;
server.on('clientError', (err, socket) => socket.destroy());
server.listen(listenPort, '127.0.0.1', () => {
  console.log('fault proxy listening on 127.0.0.1:' + server.address().port);
});
