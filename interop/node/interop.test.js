// Interop tests: drive a live `basalt start` node with the real Node Riak
// client, npm `basho-riak-client` 2.4.0 (pinned in package.json and
// package-lock.json), over Riak's Protocol Buffers API. Uses only Node's
// built-in test runner (`node --test`).
//
// Run them with interop/run.sh, which builds basalt, starts a node on a free
// loopback port with a temporary data dir and sets BASALT_PB_ADDR
// (host:port). Without BASALT_PB_ADDR every test is skipped. With
// BASALT_USER, BASALT_PASSWORD and BASALT_CACERT (the security stage) the
// client connects with STARTTLS and that password (the Node's `auth`).
//
// Covered (default bucket type): ping; store/fetch with content type and
// user metadata; fetch not found; delete then not found; siblings with
// allow_mult (set with StoreBucketProps) and their resolution with the
// vclock; 2i range with return terms, and paging via continuation (the
// client always sends stream=true); list keys (streamed and not); fetch
// bucket props.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Riak = require('basho-riak-client');

const addr = process.env.BASALT_PB_ADDR;
const skip = addr ? false : 'BASALT_PB_ADDR not set (run interop/run.sh)';
// Unique per run, so reruns against the same node do not see old data.
const run = `${Date.now()}-${process.pid}`;
const bucket = (name) => `node-${name}-${run}`;

let client;

before(async () => {
  if (skip) return;
  if (process.env.BASALT_USER) {
    const [host, port] = addr.split(':');
    const node = new Riak.Node({
      remoteAddress: host,
      remotePort: Number(port),
      minConnections: 0,
      auth: {
        user: process.env.BASALT_USER,
        password: process.env.BASALT_PASSWORD,
        ca: [require('node:fs').readFileSync(process.env.BASALT_CACERT)],
      },
    });
    client = new Riak.Client(new Riak.Cluster({ nodes: [node] }));
    return;
  }
  client = await new Promise((resolve, reject) => {
    const c = new Riak.Client([addr], (err) => (err ? reject(err) : resolve(c)));
  });
});

after(async () => {
  if (client) await new Promise((resolve) => client.stop(() => resolve()));
});

// Runs a one-reply client method as a promise.
function call(method, options) {
  return new Promise((resolve, reject) => {
    const cb = (err, resp) => (err ? reject(err) : resolve(resp));
    if (options === undefined) client[method](cb);
    else client[method](options, cb);
  });
}

// Runs a streaming client method, collecting every callback until `done`.
function stream(method, options) {
  return new Promise((resolve, reject) => {
    const frames = [];
    client[method](options, (err, resp) => {
      if (err) return reject(err);
      frames.push(resp);
      if (resp.done) resolve(frames);
    });
  });
}

function textObject(value) {
  const obj = new Riak.Commands.KV.RiakObject();
  obj.setContentType('text/plain');
  obj.setValue(value);
  return obj;
}

test('ping', { skip }, async () => {
  assert.equal(await call('ping'), true);
});

test('store and fetch with content type and usermeta', { skip }, async () => {
  const b = bucket('kv');
  const obj = new Riak.Commands.KV.RiakObject();
  obj.setContentType('application/json');
  obj.setValue(JSON.stringify({ hello: 'world' }));
  obj.setUserMeta([
    { key: 'owner', value: 'alice' },
    { key: 'color', value: 'blue' },
  ]);
  await call('storeValue', { bucket: b, key: 'k1', value: obj });

  const resp = await call('fetchValue', { bucket: b, key: 'k1', convertToJs: true });
  assert.equal(resp.isNotFound, false);
  assert.equal(resp.values.length, 1);
  const got = resp.values[0];
  assert.deepEqual(got.value, { hello: 'world' });
  assert.equal(got.contentType, 'application/json');
  const meta = Object.fromEntries(got.userMeta.map((m) => [m.key, m.value]));
  assert.deepEqual(meta, { owner: 'alice', color: 'blue' });
  assert.ok(Buffer.isBuffer(resp.vclock) && resp.vclock.length > 0, 'vclock');
  assert.ok(got.lastModified > 0, 'last modified');

  // a plain string value comes back as a Buffer
  await call('storeValue', { bucket: b, key: 'k2', value: textObject('hello') });
  const r2 = await call('fetchValue', { bucket: b, key: 'k2' });
  assert.equal(r2.values[0].value.toString('utf8'), 'hello');
  assert.equal(r2.values[0].contentType, 'text/plain');
});

test('fetch not found', { skip }, async () => {
  const resp = await call('fetchValue', { bucket: bucket('kv'), key: 'nope' });
  assert.equal(resp.isNotFound, true);
  assert.deepEqual(resp.values, []);
});

test('delete then not found', { skip }, async () => {
  const b = bucket('del');
  await call('storeValue', { bucket: b, key: 'gone', value: textObject('x') });
  const before = await call('fetchValue', { bucket: b, key: 'gone' });
  assert.equal(before.isNotFound, false);
  assert.equal(await call('deleteValue', { bucket: b, key: 'gone', vclock: before.vclock }), true);
  const after = await call('fetchValue', { bucket: b, key: 'gone' });
  assert.equal(after.isNotFound, true);
  // deleting a missing key succeeds too
  assert.equal(await call('deleteValue', { bucket: b, key: 'never' }), true);
});

test('siblings with allow_mult and resolution with the vclock', { skip }, async () => {
  const b = bucket('sib');
  assert.equal(await call('storeBucketProps', { bucket: b, allowMult: true }), true);
  const props = await call('fetchBucketProps', { bucket: b });
  assert.equal(props.allowMult, true);

  // two writes without a vclock -> two siblings
  await call('storeValue', { bucket: b, key: 'k', value: textObject('one') });
  await call('storeValue', { bucket: b, key: 'k', value: textObject('two') });
  const resp = await call('fetchValue', { bucket: b, key: 'k' });
  const values = resp.values.map((v) => v.value.toString('utf8')).sort();
  assert.deepEqual(values, ['one', 'two']);

  // resolve: write with the fetched vclock -> one value
  const resolved = textObject('resolved');
  resolved.setVClock(resp.vclock);
  await call('storeValue', { bucket: b, key: 'k', value: resolved });
  const after = await call('fetchValue', { bucket: b, key: 'k' });
  assert.equal(after.values.length, 1);
  assert.equal(after.values[0].value.toString('utf8'), 'resolved');

  // the client's conflictResolver sees the siblings
  await call('storeValue', { bucket: b, key: 'k', value: textObject('three') });
  const picked = await call('fetchValue', {
    bucket: b,
    key: 'k',
    conflictResolver: (objs) => {
      assert.equal(objs.length, 2);
      return objs.find((o) => o.value.toString('utf8') === 'three');
    },
  });
  assert.equal(picked.values.length, 1);
  assert.equal(picked.values[0].value.toString('utf8'), 'three');
});

test('2i range with return terms and paging', { skip }, async () => {
  const b = bucket('2i');
  const n = 25;
  for (let i = 0; i < n; i++) {
    const obj = textObject(`v${i}`);
    obj.addToIndex('age_int', 100 + i);
    obj.addToIndex('name_bin', `name${String(i).padStart(2, '0')}`);
    await call('storeValue', { bucket: b, key: `key${String(i).padStart(2, '0')}`, value: obj });
  }

  // range with return terms, non-streamed (collected by the client)
  const r = await call('secondaryIndexQuery', {
    bucket: b,
    indexName: 'age_int',
    rangeStart: 105,
    rangeEnd: 109,
    returnKeyAndIndex: true,
    stream: false,
  });
  assert.deepEqual(
    r.values,
    [5, 6, 7, 8, 9].map((i) => ({ indexKey: 100 + i, objectKey: `key0${i}` })),
  );

  // bin exact match
  const eq = await call('secondaryIndexQuery', {
    bucket: b,
    indexName: 'name_bin',
    indexKey: 'name07',
    stream: false,
  });
  assert.deepEqual(eq.values.map((v) => v.objectKey), ['key07']);

  // paging: maxResults 10 -> 10 + 10 + 5, continuation in the done frame
  const seen = [];
  let continuation = null;
  let pages = 0;
  for (;;) {
    const frames = await stream('secondaryIndexQuery', {
      bucket: b,
      indexName: 'age_int',
      rangeStart: 0,
      rangeEnd: 1000,
      returnKeyAndIndex: true,
      maxResults: 10,
      continuation,
    });
    pages++;
    for (const f of frames) seen.push(...f.values);
    const last = frames[frames.length - 1];
    if (!last.continuation) break;
    continuation = last.continuation;
    assert.ok(pages < 10, 'paging does not end');
  }
  assert.equal(pages, 3);
  assert.deepEqual(
    seen,
    Array.from({ length: n }, (_, i) => ({
      indexKey: 100 + i,
      objectKey: `key${String(i).padStart(2, '0')}`,
    })),
  );
});

test('list keys', { skip }, async () => {
  const b = bucket('lk');
  const want = [];
  for (let i = 0; i < 12; i++) {
    want.push(`k${i}`);
    await call('storeValue', { bucket: b, key: `k${i}`, value: textObject('v') });
  }
  want.sort();
  const frames = await stream('listKeys', { bucket: b });
  assert.ok(frames[frames.length - 1].done);
  assert.deepEqual(frames.flatMap((f) => f.keys).sort(), want);

  const all = await call('listKeys', { bucket: b, stream: false });
  assert.deepEqual(all.keys.slice().sort(), want);
});

test('fetch bucket props', { skip }, async () => {
  const props = await call('fetchBucketProps', { bucket: bucket('props') });
  assert.equal(props.nVal, 3);
  assert.equal(props.allowMult, false);
  assert.equal(props.lastWriteWins, false);
  assert.equal(props.notFoundOk, true);
  assert.equal(props.oldVClock, 86400);
  assert.equal(props.youngVClock, 20);
  assert.equal(props.bigVClock, 50);
  assert.equal(props.smallVClock, 50);
  assert.deepEqual(props.precommit, []);
  assert.deepEqual(props.postcommit, []);
});
