//! Runs a MapReduce job on the node (the I/O around [`super::core`]):
//! reads the inputs (listed keys; a 2i query; a whole bucket as a bounded
//! coverage fold, in batches, its first map phase run where the data is by
//! [`super::local`]), fetches the objects map and link phases
//! need (KV GETs, [`MAPRED_FETCH_PARALLEL`] at once), calls the phase
//! functions (Erlang built-ins here, JavaScript on the VM pools), and
//! sends each kept phase's results to `out` as they are made, within the
//! job's timeout and the node's input and result limits.
//!
//! Flow: a batch of inputs goes through map and link phases until a
//! reduce phase absorbs it (re-reducing every `reduce_phase_batch_size`
//! values); once the inputs are exhausted each reduce phase in turn makes
//! its last call and sends its output on through the phases after it.

use super::core::{follow_links, Fetched, Item, Kept, ReduceState};
use super::job::{BucketName, Inputs, Job, KeyInput, Phase, PhaseFun, PhaseKind};
use super::MapRed;
use super::MapRedError;
use crate::error::RequestError;
use crate::kv::{GetOpts, GetOutcome};
use crate::limits::{MAPRED_FETCH_PARALLEL, MAPRED_JS_MAP_BATCH, MAPRED_RESULTS_PER_FRAME};
use crate::mapred::js::{JsCall, JsError, PoolKind};
use basalt_backend::IndexQuery;
use futures_util::stream::{self, StreamExt};
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::mpsc;

/// Where a job sends its kept results: `(phase, values)`.
pub type ResultTx = mpsc::Sender<(usize, Vec<Value>)>;

/// Keys (or objects) handed to the first phase at a time.
const INPUT_BATCH: usize = 100;

impl MapRed {
    /// Runs `job`, sending kept results to `out` as they are made; `Ok`
    /// once every phase is done. A closed `out` (client gone) stops it.
    pub async fn mapred(&self, job: Job, out: ResultTx) -> Result<(), MapRedError> {
        self.stats.mapred_jobs.fetch_add(1, Ordering::Relaxed);
        let _timer = self.stats.latency.timer(crate::latency::Op::MapRed);
        let deadline = Instant::now() + job.timeout;
        let res =
            match tokio::time::timeout(job.timeout, self.mapred_run(&job, out, deadline)).await {
                Ok(r) => r,
                Err(_) => Err(MapRedError::Timeout),
            };
        if let Err(e) = &res {
            self.stats.mapred_errors.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(error = %e, "MapReduce job failed");
        }
        res
    }

    async fn mapred_run(
        &self,
        job: &Job,
        out: ResultTx,
        deadline: Instant,
    ) -> Result<(), MapRedError> {
        let mut run = Run::new(self, &job.query, out, deadline)?;
        let cfg = &self.config.mapred;
        match &job.inputs {
            Inputs::Keys(list) => {
                for chunk in list.chunks(INPUT_BATCH) {
                    run.feed(0, chunk.iter().cloned().map(Item::Key).collect())
                        .await?;
                }
            }
            Inputs::Index {
                bucket,
                index,
                start,
                end,
            } => {
                let items = self
                    .index_inputs(bucket, index, start, end.as_ref())
                    .await?;
                for chunk in items.chunks(INPUT_BATCH) {
                    run.feed(0, chunk.to_vec()).await?;
                }
            }
            Inputs::Bucket { bucket, filters } => {
                if !cfg.allow_bucket_inputs {
                    return Err(MapRedError::Limit(
                        "whole-bucket inputs are refused on this node (mapred.allow_bucket_inputs = false); list the keys or use a 2i input".into(),
                    ));
                }
                let sb = self
                    .types
                    .storage_bucket(bucket.btype.as_deref(), &bucket.bucket)?;
                let first_map = match job.query.first() {
                    Some(Phase {
                        kind: PhaseKind::Map(f),
                        arg,
                        ..
                    }) if filters.is_empty() => Some((f, arg)),
                    _ => None,
                };
                let (tx, rx) = mpsc::channel::<Fed>(1);
                let consume = async move {
                    let mut rx = rx;
                    while let Some(fed) = rx.recv().await {
                        match fed {
                            Fed::Items(items) => run.feed(0, items).await?,
                            Fed::Mapped(outputs, read) => run.mapped_first(outputs, read).await?,
                        }
                    }
                    Ok::<Run<'_>, MapRedError>(run)
                };
                let b = bucket.clone();
                // Owns `tx`: the consumer ends when the producer does.
                let produce = async move {
                    if let Some((f, arg)) = first_map {
                        // The first map phase runs where the data is.
                        let (mtx, mut mrx) = mpsc::channel(1);
                        let fold = self.map_fold(&sb, f, arg, deadline, mtx);
                        let relay = async {
                            while let Some((outputs, read)) = mrx.recv().await {
                                if tx.send(Fed::Mapped(outputs, read)).await.is_err() {
                                    return;
                                }
                            }
                        };
                        let (r, ()) = tokio::join!(fold, relay);
                        r
                    } else {
                        self.list_keys(&sb, |keys| {
                            let tx = tx.clone();
                            let b = b.clone();
                            async move {
                                let items: Vec<Item> = keys
                                    .into_iter()
                                    .filter(|k| super::keyfilter::matches(filters, k))
                                    .map(|key| {
                                        Item::Key(KeyInput {
                                            bucket: b.clone(),
                                            key,
                                            keydata: None,
                                        })
                                    })
                                    .collect();
                                items.is_empty() || tx.send(Fed::Items(items)).await.is_ok()
                            }
                        })
                        .await
                        .map_err(MapRedError::Request)
                    }
                };
                let (produced, consumed) = tokio::join!(produce, consume);
                // The consumer's error (it stopped the fold) comes first.
                run = consumed?;
                produced?;
            }
        }
        run.finish().await
    }

    /// The keys of a 2i input (an equality or range query on `index`), at
    /// most `mapred.max_inputs` of them plus one (the run refuses more).
    async fn index_inputs(
        &self,
        bucket: &BucketName,
        index: &[u8],
        start: &[u8],
        end: Option<&Vec<u8>>,
    ) -> Result<Vec<Item>, MapRedError> {
        let sb = self
            .types
            .storage_bucket(bucket.btype.as_deref(), &bucket.bucket)?;
        let q = IndexQuery {
            bucket: sb,
            field: index.to_vec(),
            start: start.to_vec(),
            end: end.cloned(),
            return_terms: false,
            term_regex: None,
            // One more than allowed: enough to tell it is too many.
            max_results: Some(
                u32::try_from(self.config.mapred.max_inputs.saturating_add(1)).unwrap_or(u32::MAX),
            ),
            continuation: None,
            start_after: None,
        };
        let page = self.index_query(q).await.map_err(|e| match e {
            RequestError::Invalid(m) => {
                MapRedError::Request(RequestError::Invalid(format!("inputs.index: {m}")))
            }
            other => MapRedError::Request(other),
        })?;
        Ok(page
            .results
            .into_iter()
            .map(|r| {
                Item::Key(KeyInput {
                    bucket: bucket.clone(),
                    key: r.key,
                    keydata: None,
                })
            })
            .collect())
    }
}

/// What the bucket input's producer hands the job.
enum Fed {
    /// Keys for the first phase.
    Items(Vec<Item>),
    /// The first (map) phase's outputs, run where the data is, and the
    /// objects it read.
    Mapped(Vec<Value>, u64),
}

/// One running job.
struct Run<'a> {
    node: &'a MapRed,
    phases: &'a [Phase],
    reduce: Vec<Option<ReduceState>>,
    kept: Kept,
    out: ResultTx,
    deadline: Instant,
    read: u64,
}

impl<'a> Run<'a> {
    fn new(
        node: &'a MapRed,
        phases: &'a [Phase],
        out: ResultTx,
        deadline: Instant,
    ) -> Result<Run<'a>, MapRedError> {
        let reduce = phases
            .iter()
            .enumerate()
            .map(|(i, p)| match p.kind {
                PhaseKind::Reduce(_) => ReduceState::new(&p.arg).map(Some).map_err(|e| {
                    MapRedError::Job(super::JobError(format!("query[{i}].reduce.arg: {e}")))
                }),
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Run {
            node,
            phases,
            reduce,
            kept: Kept::new(node.config.mapred.max_result_bytes),
            out,
            deadline,
            read: 0,
        })
    }

    /// Counts inputs read against `mapred.max_inputs`.
    fn count(&mut self, n: usize) -> Result<(), MapRedError> {
        self.read = self.read.saturating_add(n as u64);
        let max = self.node.config.mapred.max_inputs;
        if self.read > max {
            return Err(MapRedError::Limit(format!(
                "the job read more than {max} inputs (mapred.max_inputs); narrow its inputs"
            )));
        }
        Ok(())
    }

    /// Sends kept values of phase `i` to the client.
    async fn keep(&mut self, i: usize, values: &[Value]) -> Result<(), MapRedError> {
        self.kept.add(values).map_err(MapRedError::Limit)?;
        for chunk in values.chunks(MAPRED_RESULTS_PER_FRAME) {
            if self.out.send((i, chunk.to_vec())).await.is_err() {
                return Err(MapRedError::Limit("the client went away".into()));
            }
        }
        Ok(())
    }

    /// Sends `items` into phase `i` and on through the phases after it,
    /// until a reduce phase takes them (or the phases end).
    async fn feed(&mut self, mut i: usize, mut items: Vec<Item>) -> Result<(), MapRedError> {
        let phases = self.phases;
        if i == 0 {
            let unread = items.iter().filter(|x| !matches!(x, Item::Val(_))).count();
            self.count(unread)?;
        }
        if phases.is_empty() {
            // No phases: the inputs are the results.
            let values: Vec<Value> = items.into_iter().map(Item::into_value).collect();
            return self.keep(0, &values).await;
        }
        while let Some(phase) = phases.get(i) {
            if items.is_empty() {
                return Ok(());
            }
            let out = match &phase.kind {
                PhaseKind::Reduce(f) => {
                    let values = items.into_iter().map(Item::into_value).collect();
                    let batch = self.reduce[i].as_mut().and_then(|s| s.push(values));
                    if let Some(batch) = batch {
                        let out = self.call_reduce(i, f, batch, &phase.arg).await?;
                        if let Some(s) = self.reduce[i].as_mut() {
                            s.reduced(out);
                        }
                    }
                    return Ok(());
                }
                PhaseKind::Map(f) => self.map_phase(i, f, items, &phase.arg).await?,
                PhaseKind::Link { bucket, tag } => {
                    let fetched = self.fetch(i, items).await?;
                    fetched
                        .iter()
                        .flat_map(|f| follow_links(f, bucket.as_deref(), tag.as_deref()))
                        .collect()
                }
            };
            if phase.keep {
                self.keep(i, &out).await?;
            }
            items = out.into_iter().map(Item::Val).collect();
            i += 1;
        }
        Ok(())
    }

    /// Outputs of the first (map) phase, run on the covering vnodes' nodes
    /// ([`Node::map_fold`]): counted, kept if asked, sent on.
    async fn mapped_first(&mut self, outputs: Vec<Value>, read: u64) -> Result<(), MapRedError> {
        self.count(usize::try_from(read).unwrap_or(usize::MAX))?;
        if self.phases.first().is_some_and(|p| p.keep) {
            self.keep(0, &outputs).await?;
        }
        self.feed(1, outputs.into_iter().map(Item::Val).collect())
            .await
    }

    /// The end of the inputs: each reduce phase makes its last call and its
    /// output goes on.
    async fn finish(mut self) -> Result<(), MapRedError> {
        let phases = self.phases;
        for (i, phase) in phases.iter().enumerate() {
            let PhaseKind::Reduce(f) = &phase.kind else {
                continue;
            };
            let last = self.reduce[i].as_mut().and_then(ReduceState::finish);
            if let Some(batch) = last {
                let out = self.call_reduce(i, f, batch, &phase.arg).await?;
                if let Some(s) = self.reduce[i].as_mut() {
                    s.reduced(out);
                }
            }
            let out = self.reduce[i]
                .as_mut()
                .map(ReduceState::output)
                .unwrap_or_default();
            if phase.keep {
                self.keep(i, &out).await?;
            }
            self.feed(i + 1, out.into_iter().map(Item::Val).collect())
                .await?;
        }
        Ok(())
    }

    /// Reads the objects of `items` (keys; objects already read pass).
    async fn fetch(&mut self, i: usize, items: Vec<Item>) -> Result<Vec<Fetched>, MapRedError> {
        let mut inputs = Vec::with_capacity(items.len());
        for it in items {
            inputs.push(it.into_input().map_err(|e| MapRedError::Phase {
                phase: i,
                error: e,
                input: None,
                stack: None,
            })?);
        }
        if i > 0 {
            self.count(inputs.iter().filter(|x| x.is_ok()).count())?;
        }
        let node = self.node;
        stream::iter(inputs)
            .map(|x| async move {
                match x {
                    Err(f) => Ok(*f),
                    Ok(k) => fetch_one(node, k).await,
                }
            })
            .buffered(MAPRED_FETCH_PARALLEL)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(MapRedError::Request)
    }

    /// Map phase `i` over `items`: keys are mapped where they are
    /// ([`Node::map_keys`]), objects already read here.
    async fn map_phase(
        &mut self,
        i: usize,
        f: &PhaseFun,
        items: Vec<Item>,
        arg: &Value,
    ) -> Result<Vec<Value>, MapRedError> {
        let mut keys = Vec::new();
        let mut objects = Vec::new();
        for it in items {
            match it.into_input().map_err(|e| MapRedError::Phase {
                phase: i,
                error: e,
                input: None,
                stack: None,
            })? {
                Ok(k) => keys.push(k),
                Err(f) => objects.push(*f),
            }
        }
        if i > 0 {
            self.count(keys.len())?;
        }
        let mut out = if objects.is_empty() {
            Vec::new()
        } else {
            map_batch(self.node, i, f, objects, arg, self.deadline).await?
        };
        if !keys.is_empty() {
            out.extend(self.node.map_keys(i, f, arg, keys, self.deadline).await?);
        }
        Ok(out)
    }

    async fn call_reduce(
        &self,
        i: usize,
        f: &PhaseFun,
        values: Vec<Value>,
        arg: &Value,
    ) -> Result<Vec<Value>, MapRedError> {
        match f {
            PhaseFun::Erlang(b) | PhaseFun::ErlangTerms(b) => {
                b.reduce(values, arg).map_err(|e| MapRedError::Phase {
                    phase: i,
                    error: e,
                    input: None,
                    stack: None,
                })
            }
            PhaseFun::Js(fun) => {
                let call = JsCall::Reduce {
                    fun: fun.clone(),
                    values: Value::Array(values).to_string(),
                    arg: arg.to_string(),
                };
                parse_js(
                    i,
                    self.node
                        .js
                        .call(PoolKind::Reduce, call, self.deadline)
                        .await,
                )
            }
        }
    }
}

/// A map phase (phase `i`) over fetched inputs, on this node: Erlang
/// built-ins here, JavaScript on the map VM pool, in calls of
/// [`MAPRED_JS_MAP_BATCH`] inputs, one per map VM at once.
pub(crate) async fn map_batch(
    node: &MapRed,
    i: usize,
    f: &PhaseFun,
    inputs: Vec<Fetched>,
    arg: &Value,
    deadline: Instant,
) -> Result<Vec<Value>, MapRedError> {
    match f {
        PhaseFun::Erlang(b) | PhaseFun::ErlangTerms(b) => {
            let exact = matches!(f, PhaseFun::ErlangTerms(_));
            let mut out = Vec::new();
            for x in &inputs {
                out.extend(b.map_for(x, arg, exact).map_err(|e| MapRedError::Phase {
                    phase: i,
                    error: e,
                    input: Some(x.bkey_json()),
                    stack: None,
                })?);
            }
            Ok(out)
        }
        PhaseFun::Js(fun) => {
            let arg = arg.to_string();
            let calls: Vec<JsCall> = inputs
                .chunks(MAPRED_JS_MAP_BATCH)
                .map(|c| JsCall::Map {
                    fun: fun.clone(),
                    inputs: Value::Array(
                        c.iter()
                            .map(|x| Value::Array(vec![x.to_json(), x.keydata.clone()]))
                            .collect(),
                    )
                    .to_string(),
                    arg: arg.clone(),
                })
                .collect();
            let parallel = node.config.mapred.map_js_vm_count.max(1);
            let js = &node.js;
            let answers: Vec<Result<String, JsError>> = stream::iter(calls)
                .map(|c| js.call(PoolKind::Map, c, deadline))
                .buffered(parallel)
                .collect()
                .await;
            let mut out = Vec::new();
            for a in answers {
                let lists: Vec<Vec<Value>> = parse_js(i, a)?
                    .into_iter()
                    .map(|v| match v {
                        Value::Array(l) => l,
                        other => vec![other],
                    })
                    .collect();
                out.extend(lists.into_iter().flatten());
            }
            Ok(out)
        }
    }
}

/// A VM's answer (a JSON list) or its error as the phase's.
fn parse_js(i: usize, answer: Result<String, JsError>) -> Result<Vec<Value>, MapRedError> {
    let text = answer.map_err(|e| match e {
        JsError::Timeout => MapRedError::Timeout,
        JsError::Script { message, stack } => MapRedError::Phase {
            phase: i,
            error: message,
            input: None,
            stack,
        },
        other => MapRedError::Phase {
            phase: i,
            error: other.to_string(),
            input: None,
            stack: None,
        },
    })?;
    serde_json::from_str(&text).map_err(|e| MapRedError::Phase {
        phase: i,
        error: format!("bad answer from the VM: {e}"),
        input: None,
        stack: None,
    })
}

/// Reads one input (a GET with the bucket's quorum).
pub(crate) async fn fetch_one(node: &MapRed, k: KeyInput) -> Result<Fetched, RequestError> {
    let sb = node
        .types
        .storage_bucket(k.bucket.btype.as_deref(), &k.bucket.bucket)?;
    let object = match node.get(&sb, &k.key, &GetOpts::default()).await? {
        GetOutcome::Found(o) => Some(o),
        GetOutcome::NotFound | GetOutcome::Tombstone(_) => None,
    };
    Ok(Fetched {
        bucket: k.bucket,
        key: k.key,
        keydata: k.keydata.unwrap_or(Value::Null),
        object,
    })
}
