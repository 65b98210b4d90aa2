//! Fault isolation: candidates run in worker processes, so one that faults (an illegal address
//! leaves the CUDA context unusable), hangs or crashes is recorded as failed and the run goes on.
//!
//! The parent ([`WorkerBackend`], a [`TuneBackend`]) spawns workers from a [`WorkerCommand`]
//! (e.g. the rtx-bench binary's hidden `tune-worker` subcommand, or the test binary itself) and
//! talks JSON lines over their stdin/stdout. Each response line carries [`RESPONSE_PREFIX`]
//! before its JSON; anything else a worker prints to stdout (a library's banner, a test
//! harness header) is ignored. Two lanes run side by side: a compile worker (parallel compiles
//! inside, no GPU) and a measuring worker (compile from cache, verify, time). Every request has
//! a watchdog: on expiry the worker is killed and the candidate fails with
//! [`CandidateError::Timeout`]; a worker that dies fails its candidate with
//! [`CandidateError::WorkerCrashed`]; after a [`CandidateError::Fault`] the worker exits (its
//! context is lost). In every case the next request starts a fresh worker. When a compile batch
//! kills its worker, the configs it had not reported are retried one at a time, so only the
//! culprit fails.
//!
//! The child side is [`worker_main`]: a binary builds its backend and calls it.

use super::backend::{
    CandidateError, CompileSink, Evaluation, ResourceUsage, TuneBackend, TuneTask, VerifyReport,
};
use super::measure::{MeasureProtocol, TimingStats};
use crate::templates::Template;
use crate::Arch;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::marker::PhantomData;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Version of the request/response protocol; both sides must agree.
pub const WORKER_PROTOCOL_VERSION: u32 = 1;
/// Prefix of every response line a worker writes to stdout.
pub const RESPONSE_PREFIX: &str = "@rtx-tune-worker ";

/// A request from the parent, one JSON object per line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WorkerRequest {
    /// First request: the worker checks it serves this template, problem and target.
    Hello {
        /// [`WORKER_PROTOCOL_VERSION`].
        protocol: u32,
        /// Template name.
        template: String,
        /// Template version.
        template_version: u32,
        /// The problem, debug-printed.
        problem: String,
        /// Target.
        arch: Arch,
    },
    /// Compile configs; answered by one `Compiled` per config, then `CompileDone`.
    Compile {
        /// The configs in JSON form.
        configs: Vec<Value>,
    },
    /// Compile (from cache), verify on inputs from `seed`, then time.
    Evaluate {
        /// The config.
        config: Value,
        /// Seed of the fresh verification inputs.
        seed: u64,
        /// How to time it.
        protocol: MeasureProtocol,
    },
    /// Compile (from cache) and verify only.
    Verify {
        /// The config.
        config: Value,
        /// Seed of the fresh verification inputs.
        seed: u64,
    },
    /// Compile (from cache) and time only.
    Time {
        /// The config.
        config: Value,
        /// How to time it.
        protocol: MeasureProtocol,
    },
    /// Exit cleanly.
    Shutdown,
}

/// A response from the worker, one line each, after [`RESPONSE_PREFIX`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum WorkerResponse {
    /// The hello matched.
    Ready {
        /// The worker's process id.
        pid: u32,
    },
    /// The hello did not match (wrong template, problem, target or protocol).
    Refused {
        /// What differs.
        reason: String,
    },
    /// One compile result (`index` into the request's configs).
    Compiled {
        /// Position in the request.
        index: usize,
        /// The result.
        result: Result<ResourceUsage, CandidateError>,
    },
    /// All configs of a compile request were reported.
    CompileDone,
    /// Result of `Evaluate`.
    Evaluated {
        /// The result.
        result: Result<Evaluation, CandidateError>,
    },
    /// Result of `Verify`.
    Verified {
        /// The result.
        result: Result<VerifyReport, CandidateError>,
    },
    /// Result of `Time`.
    Timed {
        /// The result.
        result: Result<TimingStats, CandidateError>,
    },
    /// The request could not be parsed or came out of order.
    BadRequest {
        /// Why.
        reason: String,
    },
}

/// How to start a worker process.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerCommand {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Extra environment variables.
    pub env: Vec<(OsString, OsString)>,
}

impl WorkerCommand {
    /// Runs `program` with no arguments.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        WorkerCommand {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for the worker.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// Watchdogs and limits of a [`WorkerBackend`].
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerOptions {
    /// Time for a fresh worker to answer the hello (default 60 s).
    pub startup_timeout: Duration,
    /// Time for each compile result of a batch (default 120 s).
    pub compile_timeout: Duration,
    /// Time for one verify + time round trip (default 60 s).
    pub evaluate_timeout: Duration,
    /// Workers started at most over the backend's life (default 256); then requests fail.
    pub max_spawns: usize,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            startup_timeout: Duration::from_secs(60),
            compile_timeout: Duration::from_secs(120),
            evaluate_timeout: Duration::from_secs(60),
            max_spawns: 256,
        }
    }
}

/// What happened to a [`WorkerBackend`]'s workers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Workers started.
    pub spawned: usize,
    /// Requests killed by a watchdog.
    pub timeouts: usize,
    /// Workers that died mid-request.
    pub crashes: usize,
    /// Sticky faults reported (each retires its worker).
    pub faults: usize,
}

/// Why a worker could not answer.
enum LaneFailure {
    Timeout(Duration),
    Crashed(String),
}

impl LaneFailure {
    fn into_candidate_error(self) -> CandidateError {
        match self {
            LaneFailure::Timeout(d) => CandidateError::Timeout {
                after_ms: d.as_millis() as u64,
            },
            LaneFailure::Crashed(m) => CandidateError::WorkerCrashed(m),
        }
    }
}

struct WorkerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<WorkerResponse>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

const STDERR_TAIL_LINES: usize = 20;

impl WorkerProcess {
    fn spawn(cmd: &WorkerCommand) -> Result<WorkerProcess, String> {
        let mut c = Command::new(&cmd.program);
        c.args(&cmd.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &cmd.env {
            c.env(k, v);
        }
        let mut child = c
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", cmd.program.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let stderr = child.stderr.take().ok_or("no stderr pipe")?;
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("rtx-worker-stdout".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    // Found anywhere in the line: a test harness may have printed a partial
                    // line ("test worker ... ") before the worker's first response.
                    match line
                        .find(RESPONSE_PREFIX)
                        .map(|at| &line[at + RESPONSE_PREFIX.len()..])
                    {
                        Some(json) => match serde_json::from_str::<WorkerResponse>(json) {
                            Ok(r) => {
                                if tx.send(r).is_err() {
                                    break;
                                }
                            }
                            Err(e) => tracing::warn!("unparseable worker response ({e}): {json}"),
                        },
                        None => tracing::debug!("worker stdout: {line}"),
                    }
                }
            })
            .map_err(|e| format!("cannot start reader thread: {e}"))?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail2 = tail.clone();
        std::thread::Builder::new()
            .name("rtx-worker-stderr".into())
            .spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    tracing::debug!("worker stderr: {line}");
                    if let Ok(mut t) = tail2.lock() {
                        if t.len() == STDERR_TAIL_LINES {
                            t.pop_front();
                        }
                        t.push_back(line);
                    }
                }
            })
            .map_err(|e| format!("cannot start reader thread: {e}"))?;
        let stdin = child.stdin.take();
        Ok(WorkerProcess {
            child,
            stdin,
            rx,
            stderr_tail: tail,
        })
    }

    fn send(&mut self, req: &WorkerRequest) -> Result<(), LaneFailure> {
        let line = serde_json::to_string(req)
            .map_err(|e| LaneFailure::Crashed(format!("cannot encode request: {e}")))?;
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| LaneFailure::Crashed("stdin closed".into()))?;
        stdin
            .write_all(line.as_bytes())
            .and_then(|_| stdin.write_all(b"\n"))
            .and_then(|_| stdin.flush())
            .map_err(|e| {
                LaneFailure::Crashed(self.death_note(&format!("request write failed: {e}")))
            })
    }

    fn recv(&mut self, timeout: Duration) -> Result<WorkerResponse, LaneFailure> {
        match self.rx.recv_timeout(timeout) {
            Ok(r) => Ok(r),
            Err(RecvTimeoutError::Timeout) => Err(LaneFailure::Timeout(timeout)),
            Err(RecvTimeoutError::Disconnected) => {
                Err(LaneFailure::Crashed(self.death_note("closed its stdout")))
            }
        }
    }

    fn wait_briefly(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) => return Some(s),
                Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(5)),
                _ => return None,
            }
        }
    }

    /// The exit status and the end of stderr, for a crash message.
    fn death_note(&mut self, what: &str) -> String {
        let status = self
            .wait_briefly(Duration::from_millis(500))
            .map(|s| s.to_string())
            .unwrap_or_else(|| "still running".into());
        // Give the stderr reader a moment to drain the pipe.
        std::thread::sleep(Duration::from_millis(20));
        let tail = self
            .stderr_tail
            .lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        if tail.is_empty() {
            format!("worker {} {what} ({status})", self.child.id())
        } else {
            format!(
                "worker {} {what} ({status}); stderr:\n{tail}",
                self.child.id()
            )
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        // Closing stdin asks the worker to exit; kill it if it does not.
        self.stdin.take();
        if self.wait_briefly(Duration::from_millis(200)).is_none() {
            self.kill();
        }
    }
}

struct Lane {
    proc: Option<WorkerProcess>,
    hello: Option<WorkerRequest>,
    /// Set when a worker refused this hello: it will refuse again, so do not respawn.
    refused: Option<(WorkerRequest, String)>,
}

impl Lane {
    fn new() -> Self {
        Lane {
            proc: None,
            hello: None,
            refused: None,
        }
    }
}

/// A [`TuneBackend`] that runs every candidate in worker processes (see the module docs).
pub struct WorkerBackend<T: Template> {
    command: WorkerCommand,
    options: WorkerOptions,
    compile_lane: Mutex<Lane>,
    measure_lane: Mutex<Lane>,
    stats: Mutex<WorkerStats>,
    _template: PhantomData<fn() -> T>,
}

fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn to_json<C: Serialize>(c: &C) -> Result<Value, CandidateError> {
    serde_json::to_value(c)
        .map_err(|e| CandidateError::Rejected(format!("config does not serialise: {e}")))
}

impl<T: Template> WorkerBackend<T> {
    /// A backend that starts workers with `command`.
    pub fn new(command: WorkerCommand, options: WorkerOptions) -> Self {
        WorkerBackend {
            command,
            options,
            compile_lane: Mutex::new(Lane::new()),
            measure_lane: Mutex::new(Lane::new()),
            stats: Mutex::new(WorkerStats::default()),
            _template: PhantomData,
        }
    }

    /// What happened to the workers so far.
    pub fn stats(&self) -> WorkerStats {
        *lock(&self.stats)
    }

    fn hello(task: &TuneTask<'_, T>) -> WorkerRequest {
        WorkerRequest::Hello {
            protocol: WORKER_PROTOCOL_VERSION,
            template: task.template.name().to_string(),
            template_version: task.template.version(),
            problem: format!("{:?}", task.problem),
            arch: task.arch,
        }
    }

    /// A live, greeted worker on `lane` for `task`.
    fn ensure<'l>(
        &self,
        lane: &'l mut Lane,
        task: &TuneTask<'_, T>,
    ) -> Result<&'l mut WorkerProcess, CandidateError> {
        let hello = Self::hello(task);
        if lane.proc.is_some() && lane.hello.as_ref() == Some(&hello) {
            return lane
                .proc
                .as_mut()
                .ok_or_else(|| CandidateError::WorkerCrashed("no worker".into()));
        }
        if let Some((h, reason)) = &lane.refused {
            if *h == hello {
                return Err(CandidateError::WorkerCrashed(format!(
                    "worker refused the task: {reason}"
                )));
            }
        }
        lane.proc = None;
        {
            let mut s = lock(&self.stats);
            if s.spawned >= self.options.max_spawns {
                return Err(CandidateError::WorkerCrashed(format!(
                    "worker spawn limit ({}) reached",
                    self.options.max_spawns
                )));
            }
            s.spawned += 1;
        }
        let mut p = WorkerProcess::spawn(&self.command).map_err(CandidateError::WorkerCrashed)?;
        let greeting = p
            .send(&hello)
            .and_then(|_| p.recv(self.options.startup_timeout));
        match greeting {
            Ok(WorkerResponse::Ready { pid }) => tracing::debug!("tuning worker {pid} ready"),
            Ok(WorkerResponse::Refused { reason }) => {
                p.kill();
                lane.refused = Some((hello, reason.clone()));
                return Err(CandidateError::WorkerCrashed(format!(
                    "worker refused the task: {reason}"
                )));
            }
            Ok(other) => {
                p.kill();
                return Err(CandidateError::WorkerCrashed(format!(
                    "worker answered the hello with {other:?}"
                )));
            }
            Err(f) => {
                p.kill();
                return Err(f.into_candidate_error());
            }
        }
        lane.hello = Some(hello);
        Ok(lane.proc.insert(p))
    }

    /// Kills the lane's worker after `failure` and turns it into the candidate's error.
    fn retire(&self, lane: &mut Lane, failure: LaneFailure) -> CandidateError {
        {
            let mut s = lock(&self.stats);
            match failure {
                LaneFailure::Timeout(_) => s.timeouts += 1,
                LaneFailure::Crashed(_) => s.crashes += 1,
            }
        }
        if let Some(mut p) = lane.proc.take() {
            p.kill();
        }
        let e = failure.into_candidate_error();
        tracing::warn!("tuning worker retired: {e}");
        e
    }

    /// One request/one response on the measuring lane.
    fn round_trip(
        &self,
        task: &TuneTask<'_, T>,
        req: WorkerRequest,
    ) -> Result<WorkerResponse, CandidateError> {
        let mut lane = lock(&self.measure_lane);
        let p = self.ensure(&mut lane, task)?;
        match p
            .send(&req)
            .and_then(|_| p.recv(self.options.evaluate_timeout))
        {
            Ok(r) => Ok(r),
            Err(f) => Err(self.retire(&mut lane, f)),
        }
    }

    /// Retires the measuring worker after a sticky fault it reported.
    fn after_result<R>(&self, result: Result<R, CandidateError>) -> Result<R, CandidateError> {
        if let Err(CandidateError::Fault(_)) = &result {
            lock(&self.stats).faults += 1;
            let mut lane = lock(&self.measure_lane);
            if let Some(mut p) = lane.proc.take() {
                // It exits by itself after reporting; make sure.
                if p.wait_briefly(Duration::from_millis(500)).is_none() {
                    p.kill();
                }
            }
        }
        result
    }

    fn unexpected(&self, what: &str, got: WorkerResponse) -> CandidateError {
        let mut lane = lock(&self.measure_lane);
        if let Some(mut p) = lane.proc.take() {
            p.kill();
        }
        CandidateError::WorkerCrashed(format!("worker answered {what} with {got:?}"))
    }

    /// Sends one compile request for `items` (positions in `configs`); reports each result.
    /// Returns the positions not reported if the worker died or hung.
    fn compile_batch(
        &self,
        lane: &mut Lane,
        task: &TuneTask<'_, T>,
        jsons: &[Value],
        items: &[usize],
        sink: &CompileSink<'_>,
    ) -> Result<(), (Vec<usize>, CandidateError)> {
        let p = match self.ensure(lane, task) {
            Ok(p) => p,
            Err(e) => return Err((items.to_vec(), e)),
        };
        let req = WorkerRequest::Compile {
            configs: items.iter().map(|&i| jsons[i].clone()).collect(),
        };
        let mut left: Vec<usize> = items.to_vec();
        if let Err(f) = p.send(&req) {
            return Err((left, self.retire(lane, f)));
        }
        loop {
            let p = match lane.proc.as_mut() {
                Some(p) => p,
                None => return Err((left, CandidateError::WorkerCrashed("worker gone".into()))),
            };
            match p.recv(self.options.compile_timeout) {
                Ok(WorkerResponse::Compiled { index, result }) => {
                    if let Some(&orig) = items.get(index) {
                        left.retain(|&x| x != orig);
                        sink.emit(orig, result);
                    }
                }
                Ok(WorkerResponse::CompileDone) => {
                    for orig in left {
                        sink.emit(
                            orig,
                            Err(CandidateError::Compile(
                                "the worker reported no result".into(),
                            )),
                        );
                    }
                    return Ok(());
                }
                Ok(other) => {
                    let e = self.retire(
                        lane,
                        LaneFailure::Crashed(format!("unexpected compile reply {other:?}")),
                    );
                    return Err((left, e));
                }
                Err(f) => return Err((left, self.retire(lane, f))),
            }
        }
    }
}

impl<T: Template> TuneBackend<T> for WorkerBackend<T> {
    fn compile(
        &self,
        task: &TuneTask<'_, T>,
        config: &T::Config,
    ) -> Result<ResourceUsage, CandidateError> {
        let out = Mutex::new(None);
        let emit = |_: usize, r: Result<ResourceUsage, CandidateError>| *lock(&out) = Some(r);
        let cancel = AtomicBool::new(false);
        self.compile_many(
            task,
            std::slice::from_ref(config),
            &CompileSink::new(&emit, &cancel),
        );
        let r = lock(&out).take();
        r.unwrap_or_else(|| Err(CandidateError::WorkerCrashed("no compile result".into())))
    }

    fn compile_many(&self, task: &TuneTask<'_, T>, configs: &[T::Config], sink: &CompileSink<'_>) {
        let mut jsons = Vec::with_capacity(configs.len());
        let mut items = Vec::new();
        for (i, c) in configs.iter().enumerate() {
            match to_json(c) {
                Ok(j) => {
                    jsons.push(j);
                    items.push(i);
                }
                Err(e) => {
                    jsons.push(Value::Null);
                    sink.emit(i, Err(e));
                }
            }
        }
        let mut lane = lock(&self.compile_lane);
        let Err((left, first)) = self.compile_batch(&mut lane, task, &jsons, &items, sink) else {
            return;
        };
        if left.len() == 1 {
            sink.emit(left[0], Err(first));
            return;
        }
        // The batch took its worker down: retry the unreported configs one by one, so only the
        // culprit fails.
        for i in left {
            if sink.is_cancelled() {
                return;
            }
            if let Err((_, e)) = self.compile_batch(&mut lane, task, &jsons, &[i], sink) {
                sink.emit(i, Err(e));
            }
        }
    }

    fn verify(
        &self,
        task: &TuneTask<'_, T>,
        config: &T::Config,
        seed: u64,
    ) -> Result<VerifyReport, CandidateError> {
        let req = WorkerRequest::Verify {
            config: to_json(config)?,
            seed,
        };
        match self.round_trip(task, req)? {
            WorkerResponse::Verified { result } => self.after_result(result),
            other => Err(self.unexpected("verify", other)),
        }
    }

    fn time(
        &self,
        task: &TuneTask<'_, T>,
        config: &T::Config,
        protocol: &MeasureProtocol,
    ) -> Result<TimingStats, CandidateError> {
        let req = WorkerRequest::Time {
            config: to_json(config)?,
            protocol: protocol.clone(),
        };
        match self.round_trip(task, req)? {
            WorkerResponse::Timed { result } => self.after_result(result),
            other => Err(self.unexpected("time", other)),
        }
    }

    fn evaluate(
        &self,
        task: &TuneTask<'_, T>,
        config: &T::Config,
        seed: u64,
        protocol: &MeasureProtocol,
    ) -> Result<Evaluation, CandidateError> {
        let req = WorkerRequest::Evaluate {
            config: to_json(config)?,
            seed,
            protocol: protocol.clone(),
        };
        match self.round_trip(task, req)? {
            WorkerResponse::Evaluated { result } => self.after_result(result),
            other => Err(self.unexpected("evaluate", other)),
        }
    }

    fn isolates_faults(&self) -> bool {
        true
    }
}

/// Why [`worker_main`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerExit {
    /// The parent closed stdin or sent `Shutdown`.
    Finished,
    /// A sticky fault (or a panic) left the backend unusable; the process must exit.
    ContextLost,
    /// The parent's hello did not match this worker.
    Refused,
}

impl WorkerExit {
    /// The process exit code a worker binary should use (0, 3, 4).
    pub fn code(self) -> i32 {
        match self {
            WorkerExit::Finished => 0,
            WorkerExit::ContextLost => 3,
            WorkerExit::Refused => 4,
        }
    }
}

/// Serves requests from stdin on stdout until the parent hangs up (see the module docs).
/// The caller exits the process with [`WorkerExit::code`].
pub fn worker_main<T: Template, B: TuneBackend<T>>(
    template: &T,
    problem: &T::Problem,
    arch: Arch,
    backend: &B,
) -> std::io::Result<WorkerExit> {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    serve(template, problem, arch, backend, stdin.lock(), &mut stdout)
}

/// [`worker_main`] over any reader and writer.
pub fn serve<T: Template, B: TuneBackend<T>>(
    template: &T,
    problem: &T::Problem,
    arch: Arch,
    backend: &B,
    input: impl BufRead,
    output: &mut (dyn Write + Send),
) -> std::io::Result<WorkerExit> {
    let out = Mutex::new(output);
    let reply = |r: &WorkerResponse| -> std::io::Result<()> {
        // One write per line, so nothing else printed to stdout can split a response.
        let line = format!(
            "{RESPONSE_PREFIX}{}\n",
            serde_json::to_string(r).map_err(std::io::Error::other)?
        );
        let mut o = lock(&out);
        o.write_all(line.as_bytes())?;
        o.flush()
    };
    let task = TuneTask {
        template,
        problem,
        arch,
    };
    let expected = WorkerRequest::Hello {
        protocol: WORKER_PROTOCOL_VERSION,
        template: template.name().to_string(),
        template_version: template.version(),
        problem: format!("{problem:?}"),
        arch,
    };
    let decode = |v: Value| -> Result<T::Config, CandidateError> {
        serde_json::from_value(v)
            .map_err(|e| CandidateError::Rejected(format!("config does not decode: {e}")))
    };
    let guarded = |f: &dyn Fn() -> WorkerResponse| -> (WorkerResponse, bool) {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(r) => {
                let lost = matches!(
                    &r,
                    WorkerResponse::Evaluated {
                        result: Err(CandidateError::Fault(_))
                    } | WorkerResponse::Verified {
                        result: Err(CandidateError::Fault(_))
                    } | WorkerResponse::Timed {
                        result: Err(CandidateError::Fault(_))
                    }
                );
                (r, lost)
            }
            Err(_) => (
                WorkerResponse::Evaluated {
                    result: Err(CandidateError::Fault("the backend panicked".into())),
                },
                true,
            ),
        }
    };
    let mut greeted = false;
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let req: WorkerRequest = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                reply(&WorkerResponse::BadRequest {
                    reason: format!("unparseable request: {e}"),
                })?;
                continue;
            }
        };
        if !greeted && !matches!(req, WorkerRequest::Hello { .. } | WorkerRequest::Shutdown) {
            reply(&WorkerResponse::BadRequest {
                reason: "the first request must be hello".into(),
            })?;
            continue;
        }
        match req {
            WorkerRequest::Hello { .. } => {
                if req == expected {
                    greeted = true;
                    reply(&WorkerResponse::Ready {
                        pid: std::process::id(),
                    })?;
                } else {
                    reply(&WorkerResponse::Refused {
                        reason: format!("expected {expected:?}, got {req:?}"),
                    })?;
                    return Ok(WorkerExit::Refused);
                }
            }
            WorkerRequest::Shutdown => return Ok(WorkerExit::Finished),
            WorkerRequest::Compile { configs } => {
                let mut decoded = Vec::new();
                let mut positions = Vec::new();
                for (i, v) in configs.into_iter().enumerate() {
                    match decode(v) {
                        Ok(c) => {
                            decoded.push(c);
                            positions.push(i);
                        }
                        Err(e) => reply(&WorkerResponse::Compiled {
                            index: i,
                            result: Err(e),
                        })?,
                    }
                }
                let write_err = Mutex::new(None);
                let emit = |j: usize, result: Result<ResourceUsage, CandidateError>| {
                    let index = positions.get(j).copied().unwrap_or(j);
                    if let Err(e) = reply(&WorkerResponse::Compiled { index, result }) {
                        *lock(&write_err) = Some(e);
                    }
                };
                let cancel = AtomicBool::new(false);
                backend.compile_many(&task, &decoded, &CompileSink::new(&emit, &cancel));
                if let Some(e) = lock(&write_err).take() {
                    return Err(e);
                }
                reply(&WorkerResponse::CompileDone)?;
            }
            WorkerRequest::Evaluate {
                config,
                seed,
                protocol,
            } => {
                let (r, lost) = guarded(&|| {
                    let result = decode(config.clone()).and_then(|c| {
                        backend.compile(&task, &c)?;
                        backend.evaluate(&task, &c, seed, &protocol)
                    });
                    WorkerResponse::Evaluated { result }
                });
                reply(&r)?;
                if lost {
                    return Ok(WorkerExit::ContextLost);
                }
            }
            WorkerRequest::Verify { config, seed } => {
                let (r, lost) = guarded(&|| {
                    let result = decode(config.clone()).and_then(|c| {
                        backend.compile(&task, &c)?;
                        backend.verify(&task, &c, seed)
                    });
                    WorkerResponse::Verified { result }
                });
                reply(&r)?;
                if lost {
                    return Ok(WorkerExit::ContextLost);
                }
            }
            WorkerRequest::Time { config, protocol } => {
                let (r, lost) = guarded(&|| {
                    let result = decode(config.clone()).and_then(|c| {
                        backend.compile(&task, &c)?;
                        backend.time(&task, &c, &protocol)
                    });
                    WorkerResponse::Timed { result }
                });
                reply(&r)?;
                if lost {
                    return Ok(WorkerExit::ContextLost);
                }
            }
        }
    }
    Ok(WorkerExit::Finished)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuner::testing::{quick_protocol, Script, ScriptedBackend, ToyProblem, ToyTemplate};
    use serde_json::json;

    fn hello(n: u32) -> WorkerRequest {
        WorkerRequest::Hello {
            protocol: WORKER_PROTOCOL_VERSION,
            template: "toy".into(),
            template_version: 1,
            problem: format!("{:?}", ToyProblem { n }),
            arch: Arch::Sm90a,
        }
    }

    /// Runs `serve` over `requests` and parses its replies.
    fn session(
        backend: &ScriptedBackend,
        requests: &[WorkerRequest],
    ) -> (WorkerExit, Vec<WorkerResponse>) {
        let input: String = requests
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        let mut out: Vec<u8> = Vec::new();
        let exit = serve(
            &ToyTemplate::default(),
            &ToyProblem { n: 8 },
            Arch::Sm90a,
            backend,
            input.as_bytes(),
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let replies = text
            .lines()
            .map(|l| {
                serde_json::from_str(
                    l.strip_prefix(RESPONSE_PREFIX)
                        .expect("every line is prefixed"),
                )
                .unwrap()
            })
            .collect();
        (exit, replies)
    }

    #[test]
    fn serves_compile_and_evaluate() {
        let b = ScriptedBackend::new([(2, Script::CompileError), (3, Script::WrongResult)]);
        let cfg = |id| serde_json::to_value(ToyTemplate::config(id)).unwrap();
        let (exit, r) = session(
            &b,
            &[
                hello(8),
                WorkerRequest::Compile {
                    configs: vec![cfg(1), cfg(2), json!({"bogus": true})],
                },
                WorkerRequest::Evaluate {
                    config: cfg(1),
                    seed: 7,
                    protocol: quick_protocol(),
                },
                WorkerRequest::Evaluate {
                    config: cfg(3),
                    seed: 8,
                    protocol: quick_protocol(),
                },
                WorkerRequest::Verify {
                    config: cfg(1),
                    seed: 9,
                },
                WorkerRequest::Time {
                    config: cfg(1),
                    protocol: quick_protocol(),
                },
                WorkerRequest::Shutdown,
            ],
        );
        assert_eq!(exit, WorkerExit::Finished);
        assert!(matches!(r[0], WorkerResponse::Ready { .. }));
        let mut compiled: Vec<(usize, &'static str)> = r[1..4]
            .iter()
            .map(|x| match x {
                WorkerResponse::Compiled { index, result } => {
                    (*index, result.as_ref().err().map_or("ok", |e| e.kind()))
                }
                other => panic!("{other:?}"),
            })
            .collect();
        compiled.sort();
        assert_eq!(compiled, vec![(0, "ok"), (1, "compile"), (2, "rejected")]);
        assert_eq!(r[4], WorkerResponse::CompileDone);
        assert!(
            matches!(&r[5], WorkerResponse::Evaluated { result: Ok(ev) } if ev.stats.median_us == 101.0)
        );
        assert!(matches!(
            &r[6],
            WorkerResponse::Evaluated {
                result: Err(CandidateError::WrongResult { .. })
            }
        ));
        assert!(matches!(&r[7], WorkerResponse::Verified { result: Ok(v) } if v.passed()));
        assert!(matches!(&r[8], WorkerResponse::Timed { result: Ok(_) }));
        assert_eq!(r.len(), 9);
        assert_eq!(
            *b.seeds.lock().unwrap(),
            vec![7, 8, 9],
            "the parent's seeds reach the backend"
        );
    }

    #[test]
    fn refuses_a_mismatched_hello_and_requires_one() {
        let b = ScriptedBackend::default();
        let (exit, r) = session(&b, &[WorkerRequest::Compile { configs: vec![] }, hello(9)]);
        assert_eq!(exit, WorkerExit::Refused);
        assert!(matches!(&r[0], WorkerResponse::BadRequest { reason } if reason.contains("hello")));
        assert!(matches!(&r[1], WorkerResponse::Refused { reason } if reason.contains("n: 9")));
    }

    #[test]
    fn a_fault_or_panic_ends_the_worker() {
        for script in [Script::Fault, Script::Panic] {
            let b = ScriptedBackend::new([(1, script.clone())]);
            let cfg = serde_json::to_value(ToyTemplate::config(1)).unwrap();
            let (exit, r) = session(
                &b,
                &[
                    hello(8),
                    WorkerRequest::Evaluate {
                        config: cfg.clone(),
                        seed: 1,
                        protocol: quick_protocol(),
                    },
                    WorkerRequest::Evaluate {
                        config: cfg,
                        seed: 2,
                        protocol: quick_protocol(),
                    },
                ],
            );
            assert_eq!(exit, WorkerExit::ContextLost, "{script:?}");
            assert_eq!(r.len(), 2, "{script:?}: nothing runs after the fault");
            assert!(matches!(
                &r[1],
                WorkerResponse::Evaluated {
                    result: Err(CandidateError::Fault(_))
                }
            ));
        }
    }

    #[test]
    fn protocol_messages_are_tagged_json() {
        let r = WorkerRequest::Evaluate {
            config: json!({"id": 1}),
            seed: 3,
            protocol: quick_protocol(),
        };
        let v: Value = serde_json::to_value(&r).unwrap();
        assert_eq!(v["op"], json!("evaluate"));
        let back: WorkerRequest = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
        let resp = WorkerResponse::Compiled {
            index: 2,
            result: Err(CandidateError::Timeout { after_ms: 5 }),
        };
        let back: WorkerResponse =
            serde_json::from_str(&serde_json::to_string(&resp).unwrap()).unwrap();
        assert_eq!(back, resp);
    }

    #[test]
    fn a_worker_that_cannot_start_fails_candidates() {
        let backend: WorkerBackend<ToyTemplate> = WorkerBackend::new(
            WorkerCommand::new("/nonexistent/rtx-tune-worker"),
            WorkerOptions {
                max_spawns: 3,
                ..Default::default()
            },
        );
        let t = ToyTemplate::default();
        let p = ToyProblem { n: 4 };
        let task = TuneTask {
            template: &t,
            problem: &p,
            arch: Arch::Sm90a,
        };
        let e = backend
            .evaluate(&task, &ToyTemplate::config(1), 0, &quick_protocol())
            .unwrap_err();
        assert!(
            matches!(&e, CandidateError::WorkerCrashed(m) if m.contains("cannot start")),
            "{e:?}"
        );
        for _ in 0..5 {
            assert!(backend.compile(&task, &ToyTemplate::config(1)).is_err());
        }
        assert_eq!(backend.stats().spawned, 3, "the spawn limit holds");
    }
}
