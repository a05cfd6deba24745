// The real Node client (basho-riak-client 2.4.0) against a node with
// security on: STARTTLS, AuthReq with a password, then store / fetch /
// delete; refused: a wrong password (user `wrong_node`), a user granted
// riak_kv.get only trying a store (`getonly`), a user whose only source
// is 10.0.0.0/8 connecting from 127.0.0.1 (`faraway`); the good user is
// still served after them.
//
// interop/run.sh's security stage sets BASALT_SECURE_PB_ADDR (host:port)
// and BASALT_SECURE_CA (the PEM file from `basalt certs ca`) after `basalt
// admin security` made those users (see security_stage there): `interop`
// (password `interop-pw`, a password source on 127.0.0.1/32,
// get/put/delete on any), `getonly` (`getonly-pw`, get on any),
// `faraway` (`faraway-pw`, a source on 10.0.0.0/8 only), `wrong_node`.
// Without them every test is skipped (so the plain Node stage skips this
// file).
//
// The client forces an RSA-only TLS 1.2 cipher list (for Riak's Erlang
// R16); with Basalt's ECDSA certificates the handshake uses TLS 1.3, whose
// suites that list does not touch.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const Riak = require('basho-riak-client');

const addr = process.env.BASALT_SECURE_PB_ADDR;
const caFile = process.env.BASALT_SECURE_CA;
const skip = addr && caFile ? false : 'BASALT_SECURE_PB_ADDR / BASALT_SECURE_CA not set';

function client(password, user = 'interop') {
  const [host, port] = addr.split(':');
  const node = new Riak.Node({
    remoteAddress: host,
    remotePort: Number(port),
    minConnections: 0,
    auth: { user, password, ca: [fs.readFileSync(caFile)] },
  });
  return new Riak.Client(new Riak.Cluster({ nodes: [node] }));
}

function call(c, method, options) {
  return new Promise((resolve, reject) => {
    c[method](options, (err, resp) => (err ? reject(err) : resolve(resp)));
  });
}

function stop(c) {
  return new Promise((resolve) => c.stop(() => resolve()));
}

test('TLS + password: store, fetch, delete', { skip }, async () => {
  const c = client('interop-pw');
  try {
    const key = `k-${Date.now()}`;
    await call(c, 'storeValue', { bucket: 'secure_node', key, value: 'v1' });
    const got = await call(c, 'fetchValue', { bucket: 'secure_node', key, convertToJs: false });
    assert.equal(got.values.length, 1);
    assert.equal(got.values[0].value.toString('utf8'), 'v1');
    await call(c, 'deleteValue', { bucket: 'secure_node', key });
    const gone = await call(c, 'fetchValue', { bucket: 'secure_node', key });
    assert.equal(gone.isNotFound, true);
  } finally {
    await stop(c);
  }
});

// One connection of the client's own connection class (what its node pool
// opens) as `user`: 'connected' or 'failed: <the server's error>'.
// (Through Riak.Client the pool would retry for ever and keep the process
// alive.)
async function connectAs(user, password) {
  const RiakConnection = require('basho-riak-client/lib/core/riakconnection');
  const [host, port] = addr.split(':');
  const conn = new RiakConnection({
    remoteAddress: host,
    remotePort: Number(port),
    connectionTimeout: 10000,
    auth: { user, password, ca: [fs.readFileSync(caFile)] },
  });
  const outcome = await new Promise((resolve) => {
    conn.on('connected', () => resolve('connected'));
    conn.on('connectFailed', (_c, err) => resolve(`failed: ${err}`));
    conn.connect();
  });
  conn.close();
  return outcome;
}

test('a wrong password is refused', { skip }, async () => {
  assert.match(await connectAs('wrong_node', 'not-the-password'), /^failed: .*Authentication failed/);
});

test('a user without a source for its address is refused', { skip }, async () => {
  assert.match(await connectAs('faraway', 'faraway-pw'), /^failed: .*No matching source/);
});

test('a user without the grant is refused the operation', { skip }, async () => {
  const c = client('getonly-pw', 'getonly');
  try {
    const got = await call(c, 'fetchValue', { bucket: 'secure_node', key: 'nokey' });
    assert.equal(got.isNotFound, true);
    await assert.rejects(
      call(c, 'storeValue', { bucket: 'secure_node', key: 'getonly', value: 'v' }),
      (err) => {
        assert.match(String(err), /Permission denied.*riak_kv\.put/);
        return true;
      },
    );
  } finally {
    await stop(c);
  }
});

test('the good user is still served after the refusals', { skip }, async () => {
  assert.equal(await connectAs('interop', 'interop-pw'), 'connected');
  const c = client('interop-pw');
  try {
    await call(c, 'storeValue', { bucket: 'secure_node', key: 'after', value: 'still' });
    const got = await call(c, 'fetchValue', { bucket: 'secure_node', key: 'after', convertToJs: false });
    assert.equal(got.values[0].value.toString('utf8'), 'still');
  } finally {
    await stop(c);
  }
});
