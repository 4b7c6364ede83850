// The on-device page: train this run's artifacts with onnxruntime-web (see workbench/ondevice/web.py).
'use strict';
const state = { phase: 'loading', losses: [], stepMs: [], accuracyBefore: null, accuracyAfter: null,
                evalLossBefore: null, evalLossAfter: null, error: null, parameters: null, config: null };
window.__workbench = state;

const $ = (id) => document.getElementById(id);
function say(text, isError) {
  $('status').textContent = text;
  $('status').className = isError ? 'error' : '';
}
function fail(err) {
  state.error = String(err && err.stack || err);
  state.phase = 'error';
  say('error: ' + (err && err.message || err), true);
  console.error(err);
}

async function fetchBytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error('cannot load ' + url + ': HTTP ' + r.status);
  return new Uint8Array(await r.arrayBuffer());
}

function feedsOf(buffer, entry, names) {
  const feeds = {};
  for (const name of names) {
    const t = entry[name];
    if (!t) throw new Error('the batches have no input ' + name + ' (they hold ' + Object.keys(entry).join(', ') + ')');
    feeds[name] = new ort.Tensor('int64', new BigInt64Array(buffer, t.offset, t.count), t.shape);
  }
  return feeds;
}

function drawCurve(losses, total) {
  const svg = $('curve'), w = +svg.getAttribute('width'), h = +svg.getAttribute('height'), pad = 40;
  if (!losses.length) { svg.innerHTML = ''; return; }
  const lo = Math.min(...losses), hi = Math.max(...losses), span = (hi - lo) || 1;
  const x = (i) => pad + (total > 1 ? i / (total - 1) : 0.5) * (w - 2 * pad);
  const y = (v) => h - pad - (v - lo) / span * (h - 2 * pad);
  const pts = losses.map((v, i) => x(i).toFixed(1) + ',' + y(v).toFixed(1)).join(' ');
  svg.innerHTML =
    '<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="' + pts + '"/>' +
    losses.map((v, i) => '<circle r="3" fill="#1f77b4" cx="' + x(i).toFixed(1) + '" cy="' + y(v).toFixed(1) + '"/>').join('') +
    '<text x="' + pad + '" y="20">loss ' + hi.toFixed(4) + ' (top) to ' + lo.toFixed(4) + ' (bottom), step 1 to ' + total + '</text>';
}

async function evaluate(session, cfg, buffer) {
  const names = session.evalInputNames;
  const logitsName = session.evalOutputNames.find((n) => n === 'logits');
  const lossName = session.evalOutputNames[0];
  if (!logitsName) {
    throw new Error('the eval graph has no logits output (outputs ' + session.evalOutputNames.join(', ') + '); rebuild the artifacts');
  }
  if (!cfg.eval.length) return { accuracy: null, loss: null };  // the data had no validation or test split
  let right = 0, count = 0, lossSum = 0;
  for (const entry of cfg.eval) {
    const out = await session.runEvalStep(feedsOf(buffer, entry, names));
    const logits = out[logitsName].data, [n, k] = out[logitsName].dims;
    const labels = new BigInt64Array(buffer, entry.labels.offset, entry.labels.count);
    for (let i = 0; i < n; i++) {
      let best = 0;
      for (let j = 1; j < k; j++) if (logits[i * k + j] > logits[i * k + best]) best = j;
      if (BigInt(best) === labels[i]) right++;
    }
    lossSum += Number(out[lossName].data[0]) * n;
    count += n;
  }
  return { accuracy: count ? right / count : NaN, loss: count ? lossSum / count : NaN };
}

const pct = (x) => x === null ? 'no eval split in the data' : (100 * x).toFixed(1) + '%';

function facts(cfg, extra) {
  const lr = cfg.lr + ' (baked into ' + cfg.optimizer_model + ': onnxruntime-web ' + cfg.ort_web_version + ' has no setter)';
  const rows = [['model', cfg.model], ['steps', cfg.steps], ['learning rate', lr],
                ['batch size', cfg.batch_size], ['seed', cfg.seed], ['trainable', cfg.trainable],
                ['eval examples', cfg.eval.reduce((a, e) => a + e.labels.count, 0)], ...extra];
  const escape = (s) => String(s).replace(/[&<>]/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;'}[c]));
  $('facts').innerHTML = rows.map(([k, v]) => '<tr><th>' + k + '</th><td>' + escape(v) + '</td></tr>').join('');
}

async function main() {
  ort.env.wasm.wasmPaths = new URL('ort/', location.href).href;
  ort.env.wasm.numThreads = 1;  // one thread: the order of every sum is fixed (and no cross-origin isolation is needed)
  ort.env.wasm.proxy = false;
  ort.env.logLevel = 'error';  // ONNX Runtime's warnings (unused dropout constants) would reach the console as errors
  const cfg = await (await fetch('config.json')).json();
  state.config = cfg;
  facts(cfg, []);
  const data = await fetchBytes(cfg.batches_file);
  const buffer = data.buffer;
  const art = cfg.artifacts;
  say('loading the artifacts…');
  const session = await ort.TrainingSession.create({
    checkpointState: await fetchBytes(art + 'checkpoint'),
    trainModel: await fetchBytes(art + 'training_model.onnx'),
    evalModel: await fetchBytes(art + 'eval_model.onnx'),
    optimizerModel: await fetchBytes(cfg.optimizer_model),
  }, { logSeverityLevel: 3 });
  state.session = session;
  say('evaluating before training…');
  const before = await evaluate(session, cfg, buffer);
  state.accuracyBefore = before.accuracy; state.evalLossBefore = before.loss;
  facts(cfg, [['accuracy before', pct(before.accuracy)]]);
  state.phase = 'ready';
  say('ready: ' + cfg.steps + ' steps');
  $('train').disabled = false;
  $('train').onclick = () => train(session, cfg, buffer).catch(fail);
  $('download').onclick = () => download(cfg);
}

async function train(session, cfg, buffer) {
  $('train').disabled = true;
  state.phase = 'training';
  state.losses = []; state.stepMs = [];
  const names = session.trainingInputNames, lossName = session.trainingOutputNames[0];
  const body = document.querySelector('#steps tbody');
  body.innerHTML = '';
  for (let i = 0; i < cfg.train.length; i++) {
    const t0 = performance.now();
    const out = await session.runTrainStep(feedsOf(buffer, cfg.train[i], names));
    await session.runOptimizerStep();
    await session.lazyResetGrad();
    const ms = performance.now() - t0;
    const loss = Number(out[lossName].data[0]);
    state.losses.push(loss); state.stepMs.push(ms);
    body.insertAdjacentHTML('beforeend', '<tr><td>' + (i + 1) + '</td><td>' + loss.toFixed(6) + '</td><td>' + ms.toFixed(1) + '</td></tr>');
    drawCurve(state.losses, cfg.train.length);
    say('step ' + (i + 1) + ' of ' + cfg.train.length + ': loss ' + loss.toFixed(4));
  }
  say('evaluating after training…');
  const after = await evaluate(session, cfg, buffer);
  state.accuracyAfter = after.accuracy; state.evalLossAfter = after.loss;
  const params = await session.getContiguousParameters(true);
  state.parameters = params.data;
  const sorted = [...state.stepMs].slice(1).sort((a, b) => a - b);
  const median = sorted.length ? sorted[Math.floor(sorted.length / 2)] : state.stepMs[0];
  facts(cfg, [['accuracy before', pct(state.accuracyBefore)], ['accuracy after', pct(after.accuracy)],
              ['median step time', median.toFixed(1) + ' ms (after the first)'], ['trained parameters', params.data.length + ' float32']]);
  $('download').disabled = false;
  $('next').textContent = 'Bring the weights back: ' + cfg.import_command;
  state.phase = 'done';
  say('done: ' + cfg.train.length + ' steps, accuracy ' + pct(state.accuracyBefore) + ' → ' + pct(after.accuracy));
}

function download(cfg) {
  const p = state.parameters;
  const blob = new Blob([new Uint8Array(p.buffer, p.byteOffset, p.byteLength)], { type: 'application/octet-stream' });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = cfg.download_name;
  document.body.appendChild(a);
  a.click();
  a.remove();
}

main().catch(fail);
