// The fleet overview's behaviour: sorting and filtering without a reload, live updates of the
// cards, the table and the treemap. The page works without it (links and a GET form); the server
// sorts and filters, this only fetches what the server renders (/fragments/fleet) and the JSON
// (/v1/fleet) with the same query. No inline script: the CSP is default-src 'self'.
(function () {
  'use strict';

  var BAND_COLORS = { green: '#1a7f37', amber: '#d4a72c', red: '#cf222e', unknown: '#6e7781' };

  document.documentElement.classList.add('js');

  function ready(fn) {
    if (document.readyState === 'loading') {
      document.addEventListener('DOMContentLoaded', fn);
    } else {
      fn();
    }
  }

  function pad(n) { return (n < 10 ? '0' : '') + n; }

  // clock shows an RFC 3339 time as the browser's local HH:MM:SS.
  function clock(iso) {
    var d = new Date(iso);
    if (isNaN(d.getTime())) { return ''; }
    return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }

  function escapeHTML(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }

  // bandOf is the seed's bands of a cluster's health score (as the server's BandOf).
  function bandOf(c) {
    if (!c.health) { return 'unknown'; }
    var s = c.health.score;
    if (s >= 80) { return 'green'; }
    if (s >= 60) { return 'amber'; }
    return 'red';
  }

  function clusterHref(c) {
    return '/clusters/' + encodeURIComponent(c.workspace) + '/' +
      encodeURIComponent(c.namespace ? c.namespace : '_') + '/' + encodeURIComponent(c.name);
  }

  ready(function () {
    var root = document.getElementById('overview');
    if (!root) { return; }
    var fragmentPath = root.getAttribute('data-fragment');
    var apiPath = root.getAttribute('data-api');
    var refreshMs = parseInt(root.getAttribute('data-refresh-ms'), 10);
    if (!(refreshMs > 0)) { refreshMs = 5000; }
    var form = document.getElementById('filters');
    var input = document.getElementById('filter');
    var band = document.getElementById('band');
    var status = document.getElementById('status');

    var params = new URLSearchParams(window.location.search);
    var state = {
      q: params.get('q') || '',
      band: params.get('band') || '',
      sort: params.get('sort') || '',
      dir: params.get('dir') || ''
    };

    // search is the state as a query string, without the defaults (as the server's links).
    function search() {
      var p = new URLSearchParams();
      if (state.q.trim() !== '') { p.set('q', state.q.trim()); }
      if (state.band !== '') { p.set('band', state.band); }
      if (state.sort !== '') {
        p.set('sort', state.sort);
        if (state.dir === 'desc') { p.set('dir', 'desc'); }
      }
      var s = p.toString();
      return s === '' ? '' : '?' + s;
    }

    function setStatus(text, isError, link) {
      status.textContent = text;
      status.classList.toggle('error', !!isError);
      if (link) {
        var a = document.createElement('a');
        a.href = link.href;
        a.textContent = link.text;
        status.appendChild(document.createTextNode(' '));
        status.appendChild(a);
      }
    }

    function showUpdated() {
      var t = document.getElementById('updated');
      if (t) { t.textContent = clock(t.getAttribute('datetime')); }
    }
    showUpdated();

    // Sync the form's hidden sort inputs, so a submit without this script keeps the order.
    function syncForm() {
      ['sort', 'dir'].forEach(function (name) {
        var el = form.querySelector('input[type="hidden"][name="' + name + '"]');
        if (!el) {
          el = document.createElement('input');
          el.type = 'hidden';
          el.name = name;
          form.appendChild(el);
        }
        el.value = state[name];
        el.disabled = state.sort === '';
      });
    }

    // --- treemap -----------------------------------------------------------------------------
    var chartEl = document.getElementById('treemap');
    var chart = null;
    if (chartEl && chartEl.getAttribute('data-chart') === 'ready') {
      if (window.echarts) {
        chart = window.echarts.init(chartEl, null, { renderer: 'canvas' });
        chart.on('click', function (p) {
          if (p.data && p.data.href) { window.location.href = p.data.href; }
        });
        window.addEventListener('resize', function () { chart.resize(); });
      } else {
        chartEl.setAttribute('data-chart', 'missing');
        chartEl.textContent = 'chart library not built: run make ui';
        chartEl.className += ' chart-missing';
      }
    }

    function renderTreemap(clusters) {
      if (!chart) { return; }
      var maxCPU = 0;
      clusters.forEach(function (c) {
        if (typeof c.cpuPercent === 'number' && c.cpuPercent > maxCPU) { maxCPU = c.cpuPercent; }
      });
      // A cluster with unknown (or zero) CPU still gets a small tile, so it can be seen and clicked.
      var minimum = Math.max(1, maxCPU * 0.04);
      var data = clusters.map(function (c) {
        var cpu = typeof c.cpuPercent === 'number' ? c.cpuPercent : null;
        var b = bandOf(c);
        return {
          id: c.workspace + '/' + (c.namespace || '_') + '/' + c.name,
          name: c.name,
          value: cpu !== null && cpu > 0 ? cpu : minimum,
          cpu: cpu,
          band: b,
          unreachable: !!c.unreachable,
          workspace: c.workspace,
          href: clusterHref(c),
          itemStyle: { color: BAND_COLORS[b] }
        };
      });
      chart.setOption({
        title: {
          show: data.length === 0,
          text: 'No cluster to show',
          left: 'center',
          top: 'middle',
          textStyle: { color: '#59636e', fontSize: 14, fontWeight: 'normal' }
        },
        tooltip: {
          formatter: function (p) {
            var d = p.data || {};
            return '<strong>' + escapeHTML(d.name || '') + '</strong><br>' +
              escapeHTML(d.workspace || '') + '<br>CPU ' +
              (d.cpu === null || d.cpu === undefined ? 'unknown' : escapeHTML(d.cpu) + '%') +
              (d.unreachable ? '<br>unreachable: health unknown' : '');
          }
        },
        series: [{
          type: 'treemap',
          roam: false,
          nodeClick: false,
          breadcrumb: { show: false },
          left: 0, top: 0, right: 0, bottom: 0,
          animationDurationUpdate: 400,
          label: {
            show: true,
            color: '#ffffff',
            fontSize: 13,
            lineHeight: 18,
            overflow: 'truncate',
            formatter: function (p) {
              var d = p.data || {};
              return d.name + (d.unreachable ? '\nunreachable' : (d.cpu === null || d.cpu === undefined ? '' : '\n' + d.cpu + '%'));
            }
          },
          itemStyle: { borderColor: '#ffffff', borderWidth: 2, gapWidth: 2 },
          data: data
        }]
      });
    }

    // --- updates ---------------------------------------------------------------------------
    var seq = 0;
    var timer = null;

    function swapFleet(html) {
      var tpl = document.createElement('template');
      tpl.innerHTML = html;
      var next = tpl.content.querySelector('#fleet');
      var current = document.getElementById('fleet');
      if (!next || !current) { return; }
      // Keep the table's scroll position and a focused header link.
      var wrap = current.querySelector('.table-wrap');
      var scrollTop = wrap ? wrap.scrollTop : 0;
      var scrollLeft = wrap ? wrap.scrollLeft : 0;
      var focused = document.activeElement;
      var focusSort = null;
      if (focused && current.contains(focused)) {
        var th = focused.closest('th[data-sort]');
        if (th) { focusSort = th.getAttribute('data-sort'); }
      }
      current.replaceWith(next);
      var nextWrap = next.querySelector('.table-wrap');
      if (nextWrap) {
        nextWrap.scrollTop = scrollTop;
        nextWrap.scrollLeft = scrollLeft;
      }
      if (focusSort) {
        var link = next.querySelector('th[data-sort="' + focusSort + '"] a');
        if (link) { link.focus(); }
      }
      showUpdated();
    }

    // failed says why an update did not work; a token the backend no longer accepts (the filter
    // answers 401, or 500 "Authentication failed" when the TokenReview fails) needs a new login.
    function failed(err) {
      if (!(err instanceof Response)) {
        setStatus('Update failed: server not reachable; retrying.', true);
        return;
      }
      err.text().catch(function () { return ''; }).then(function (text) {
        var login = { href: '/login?next=' + encodeURIComponent(window.location.pathname + window.location.search), text: 'Log in again' };
        if (err.status === 401 || (err.status === 500 && text.indexOf('Authentication failed') === 0)) {
          setStatus('The token was not accepted.', true, login);
        } else if (err.status === 403) {
          setStatus('This identity may not view the fleet overview.', true, login);
        } else {
          setStatus('Update failed (HTTP ' + err.status + '); retrying.', true);
        }
      });
    }

    function refresh() {
      var mine = ++seq;
      var q = search();
      var opts = { credentials: 'same-origin', cache: 'no-store' };
      var fragment = fetch(fragmentPath + q, opts).then(function (resp) {
        if (!resp.ok) { throw resp; }
        return resp.text();
      });
      var json = chart ? fetch(apiPath + q, opts).then(function (resp) {
        if (!resp.ok) { throw resp; }
        return resp.json();
      }) : Promise.resolve(null);
      return Promise.all([fragment, json]).then(function (res) {
        if (mine !== seq) { return; } // a newer request was sent meanwhile
        swapFleet(res[0]);
        if (res[1]) { renderTreemap(res[1].clusters || []); }
        setStatus('', false);
      }, function (err) {
        if (mine !== seq) { return; }
        failed(err);
      });
    }

    function schedule() {
      if (timer) { clearTimeout(timer); }
      timer = setTimeout(function tick() {
        timer = null;
        if (document.hidden) { return; } // resumed by visibilitychange
        refresh().then(schedule);
      }, refreshMs);
    }

    // apply shows the state now: the URL (without a history entry), then the server's answer.
    function apply() {
      syncForm();
      var q = search();
      window.history.replaceState(null, '', window.location.pathname + q);
      refresh().then(schedule);
    }

    var typing = null;
    input.addEventListener('input', function () {
      state.q = input.value;
      if (typing) { clearTimeout(typing); }
      typing = setTimeout(apply, 200);
    });
    band.addEventListener('change', function () {
      state.band = band.value;
      apply();
    });
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      state.q = input.value;
      state.band = band.value;
      apply();
    });
    root.addEventListener('click', function (e) {
      var a = e.target.closest('#clusters thead th a');
      if (!a || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) { return; }
      e.preventDefault();
      var p = new URL(a.href, window.location.href).searchParams;
      state.sort = p.get('sort') || '';
      state.dir = p.get('dir') || '';
      apply();
    });
    document.addEventListener('visibilitychange', function () {
      if (!document.hidden) { refresh().then(schedule); }
    });

    // The first treemap comes from the JSON; then every refreshMs.
    if (chart) {
      fetch(apiPath + search(), { credentials: 'same-origin', cache: 'no-store' })
        .then(function (resp) { if (!resp.ok) { throw resp; } return resp.json(); })
        .then(function (body) { renderTreemap(body.clusters || []); }, failed);
    }
    schedule();
  });
}());
