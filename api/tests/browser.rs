//! End to end in a real browser: nginx (auth_request) in front of a demo application, Sluice with a
//! room of capacity 1, headless Chromium driven over WebDriver (chromedriver) as visitors.
//! Screenshots are kept in `e2e-artifacts/` at the workspace root.

mod common;

use base64::Engine;
use common::*;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn artifacts() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../e2e-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A WebDriver session (the W3C protocol over HTTP, spoken directly).
struct Browser {
    http: reqwest::Client,
    base: String,
    session: String,
}

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// How a browser is started besides its profile directory.
#[derive(Clone, Copy)]
struct Opts {
    javascript: bool,
    /// Block every cookie (and with them the page's storage).
    cookies_blocked: bool,
    /// Window width in CSS pixels (a phone: 390).
    width: u32,
}

impl Browser {
    async fn open(driver: &str, javascript: bool, dir: &std::path::Path) -> Browser {
        Self::open_with(
            driver,
            dir,
            Opts {
                javascript,
                cookies_blocked: false,
                width: 412,
            },
        )
        .await
    }

    async fn open_with(driver: &str, dir: &std::path::Path, o: Opts) -> Browser {
        let javascript = o.javascript;
        let http = reqwest::Client::new();
        let mut args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            format!("--window-size={},915", o.width),
            format!("--user-data-dir={}", dir.display()),
        ];
        if !javascript {
            args.push("--blink-settings=scriptEnabled=false".into());
        }
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": program("chromium"), "args": args,
            "prefs": {"profile.managed_default_content_settings.javascript": if javascript { 1 } else { 2 },
                      "profile.default_content_setting_values.cookies": if o.cookies_blocked { 2 } else { 1 }}
        }}}});
        let v: Value = http
            .post(format!("{driver}/session"))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let session = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_string();
        Browser {
            http,
            base: format!("{driver}/session/{session}"),
            session,
        }
    }

    async fn cmd(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            r = r.json(&b);
        }
        let v: Value = r.send().await.unwrap().json().await.unwrap();
        v["value"].clone()
    }

    async fn go(&self, url: &str) {
        self.cmd(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    async fn url(&self) -> String {
        self.cmd(reqwest::Method::GET, "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Runs `script` in the page and returns what it returns.
    async fn run(&self, script: &str) -> Value {
        self.cmd(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    async fn source(&self) -> String {
        self.cmd(reqwest::Method::GET, "/source", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    async fn find(&self, css: &str) -> Option<String> {
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v[ELEMENT].as_str().map(str::to_string)
    }

    async fn text(&self, css: &str) -> String {
        match self.find(css).await {
            Some(e) => self
                .cmd(reqwest::Method::GET, &format!("/element/{e}/text"), None)
                .await
                .as_str()
                .unwrap_or_default()
                .to_string(),
            None => String::new(),
        }
    }

    async fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css).await.expect("element");
        self.cmd(
            reqwest::Method::POST,
            &format!("/element/{e}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    async fn click(&self, css: &str) {
        let e = self
            .find(css)
            .await
            .unwrap_or_else(|| panic!("no element {css}"));
        self.cmd(
            reqwest::Method::POST,
            &format!("/element/{e}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// Runs `fetch` in the page (same origin, with its cookies).
    async fn post(&self, path: &str) -> Value {
        let script = format!("var done=arguments[0];fetch({},{{method:'POST',credentials:'same-origin'}}).then(function(r){{done(r.status)}},function(e){{done(String(e))}})", serde_json::to_string(path).unwrap());
        self.cmd(
            reqwest::Method::POST,
            "/execute/async",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    async fn screenshot(&self, name: &str) {
        let v = self.cmd(reqwest::Method::GET, "/screenshot", None).await;
        if let Some(b) = v.as_str() {
            let png = base64::engine::general_purpose::STANDARD.decode(b).unwrap();
            std::fs::write(artifacts().join(format!("{name}.png")), png).unwrap();
        }
    }

    async fn wait_until(&self, what: &str, timeout: Duration, cond: impl Fn(&str, &str) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            let (url, src) = (self.url().await, self.source().await);
            if cond(&url, &src) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; at {url}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Runs axe-core (`src`, its browser bundle) on the page and fails on any violation of
    /// WCAG 2.0/2.1 A or AA, naming the rule and the elements.
    async fn axe(&self, src: &str, page: &str) {
        self.run(src).await;
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/execute/async",
                Some(json!({"script": "var done=arguments[0];\
axe.run(document,{runOnly:{type:'tag',values:['wcag2a','wcag2aa','wcag21a','wcag21aa']}}).then(\
function(r){done(r.violations.map(function(v){return v.id+' ('+v.impact+'): '+v.nodes.map(function(n){return n.target.join(' ')}).join(', ')}))},\
function(e){done(['axe could not run: '+e])})", "args": []})),
            )
            .await;
        assert_eq!(v, json!([]), "axe-core on the {page} page: {v}");
    }

    /// Fails if the page scrolls sideways (wider than the window).
    async fn fits(&self, page: &str) {
        let v = self
            .run("return [document.documentElement.scrollWidth, window.innerWidth]")
            .await;
        let (wide, window) = (v[0].as_u64().unwrap(), v[1].as_u64().unwrap());
        assert!(
            wide <= window,
            "{page}: {wide} px wide in a {window} px window"
        );
    }

    /// `GET path` from the page (same origin, its cookies), as JSON.
    async fn get_json(&self, path: &str) -> Value {
        let script = format!("var done=arguments[0];fetch({},{{credentials:'same-origin'}}).then(function(r){{return r.json()}}).then(done,function(e){{done(String(e))}})", serde_json::to_string(path).unwrap());
        self.cmd(
            reqwest::Method::POST,
            "/execute/async",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    async fn close(&self) {
        let _ = self.http.delete(self.base.clone()).send().await;
        let _ = &self.session;
    }
}

/// A chromedriver on a free port, ready: the process (ended when dropped) and its URL.
async fn start_driver() -> (Proc, String) {
    let port = free_port();
    let proc = Proc(
        Command::new(program("chromedriver"))
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let driver = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    wait_for("chromedriver", Duration::from_secs(20), || {
        let (http, d) = (http.clone(), format!("{driver}/status"));
        async move { http.get(&d).send().await.is_ok() }
    })
    .await;
    (proc, driver)
}

/// The shipped `deploy/nginx/sluice.conf`, pointed at this test's Sluice node and application,
/// inside a minimal main configuration: the browser test runs the configuration users copy.
fn nginx_conf(dir: &std::path::Path, listen: u16, sluice: &str, app: u16) -> String {
    let shipped = include_str!("../../deploy/nginx/sluice.conf");
    let mut server = shipped.to_string();
    for (from, to) in [
        (
            "    server 10.0.0.1:8080;\n    server 10.0.0.2:8080;\n    server 10.0.0.3:8080;\n",
            format!("    server {sluice};\n"),
        ),
        ("server 127.0.0.1:3000;", format!("server 127.0.0.1:{app};")),
        ("listen 80;", format!("listen 127.0.0.1:{listen};")),
    ] {
        assert!(
            server.contains(from),
            "the shipped configuration has {from:?}"
        );
        server = server.replace(from, &to);
    }
    format!(
        "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\nevents {{ worker_connections 256; }}\n\
http {{\n access_log off;\n client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
{server}\n}}\n",
        d = dir.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visitors_queue_and_are_admitted_through_nginx_and_the_dashboard_pauses_a_room() {
    if !prerequisites(
        "browser::visitors_queue_and_are_admitted_through_nginx_and_the_dashboard_pauses_a_room",
        &[
            Need::Program("chromium"),
            Need::Program("chromedriver"),
            Need::Program("nginx"),
            Need::Program("python3"),
        ],
    ) {
        return;
    }
    let c = Cluster::start(1).await;
    c.create_room("shop", json!({"capacity": 1, "admit_per_minute": 600000, "session_ttl_secs": 600, "waiter_ttl_secs": 600})).await;
    let dir = tempfile::tempdir().unwrap();

    // The demo application.
    let site = dir.path().join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(
        site.join("index.html"),
        "<!doctype html><title>Demo shop</title><h1>Demo shop: you are in</h1>",
    )
    .unwrap();
    let app_port = free_port();
    let _app = Proc(
        Command::new(program("python3"))
            .args([
                "-m",
                "http.server",
                &app_port.to_string(),
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(&site)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // nginx in front of both.
    let ng = dir.path().join("nginx");
    std::fs::create_dir_all(&ng).unwrap();
    let port = free_port();
    std::fs::write(
        ng.join("nginx.conf"),
        nginx_conf(&ng, port, &c.node(1).http, app_port),
    )
    .unwrap();
    let _nginx = Proc(
        Command::new(program("nginx"))
            .args([
                "-c",
                ng.join("nginx.conf").to_str().unwrap(),
                "-p",
                ng.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (_driver, driver) = start_driver().await;
    let http = reqwest::Client::new();
    wait_for("nginx and the app", Duration::from_secs(20), || {
        let http = http.clone();
        let (a, b) = (
            format!("http://127.0.0.1:{app_port}/"),
            format!("http://127.0.0.1:{port}/wait/nothing"),
        );
        async move { http.get(&a).send().await.is_ok() && http.get(&b).send().await.is_ok() }
    })
    .await;
    let site_url = format!("http://127.0.0.1:{port}/");

    // nginx matches locations on the path it decoded and normalised but passes on the
    // request's own URI: an encoded slash and `..` must not steer a request that matched a
    // visitor location to an operator route (Sluice would answer these 401 or 400 in JSON).
    for (method, path) in [
        (reqwest::Method::POST, "v1/rooms/shop/bypass/..%2Fjoin"),
        (reqwest::Method::GET, "v1/rooms/shop/ledger%2F..%2Fstatus"),
        (reqwest::Method::GET, "v1/rooms/shop/codes/..%2Fstatus"),
        (reqwest::Method::GET, "wait/shop/bypass/..%2F..%2Fshop"),
    ] {
        let r = no_redirect()
            .request(method, format!("{site_url}{path}"))
            .send()
            .await
            .unwrap();
        let status = r.status();
        let body = r.text().await.unwrap();
        assert!(
            status == 404 && !body.contains("\"error\""),
            "{path}: {status} {body}"
        );
    }

    // The proxy sends a visitor without an admission to the waiting page with the request URI
    // as the client sent it: still percent-encoded (an encoded CR LF must not become a header
    // of the attacker's choosing) and with its query string.
    let raw = no_redirect();
    let injected = "x%0d%0aSet-Cookie:%20sluice_ticket=attacker;%20Path=/?a=1&b=2";
    let r = raw
        .get(format!("{site_url}{injected}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 302);
    assert!(r.headers().get("set-cookie").is_none(), "{:?}", r.headers());
    let location = r.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(
        location,
        format!("http://127.0.0.1:{port}/wait/shop?next=/{injected}")
    );
    // Sluice takes it whole, and never decodes it into a header.
    let page = raw.get(&location).send().await.unwrap();
    let cookies: Vec<String> = page
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|c| c.to_str().unwrap().to_string())
        .collect();
    // The page asks to join (looking takes no place), and its form posts back with the same
    // `next`, still encoded.
    assert_eq!(page.status(), 200);
    assert!(cookies.is_empty(), "{cookies:?}");
    let body = page.text().await.unwrap();
    let action = format!(
        "action=\"/wait/shop?next=/{}\"",
        injected.replace('&', "&amp;")
    );
    assert!(body.contains(&action), "{body}");
    // Only the visitor part of Sluice is reachable through the proxy: the operator API is not
    // (the proxy treats it as a page of the application, behind the gate).
    for path in [
        "v1/cluster",
        "v1/rooms",
        "v1/rooms/shop",
        "v1/rooms/shop/queue",
        "metrics",
        "admin",
    ] {
        let r = raw.get(format!("{site_url}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 302, "{path}");
    }
    let r = raw
        .delete(format!("{site_url}v1/rooms/shop"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 302, "not even with the operator token");

    // Visitor A: straight through to the application.
    let a = Browser::open(&driver, true, &dir.path().join("a")).await;
    a.go(&site_url).await;
    a.wait_until(
        "A reaches the application",
        Duration::from_secs(15),
        |u, s| u == site_url && s.contains("Demo shop: you are in"),
    )
    .await;
    a.screenshot("1-visitor-a-in-the-shop").await;

    // Visitor B asks for a page with a query string: the waiting page, position 1.
    let b = Browser::open(&driver, true, &dir.path().join("b")).await;
    let with_query = format!("{site_url}?item=42&qty=2");
    b.go(&with_query).await;
    b.wait_until(
        "B sees the waiting page",
        Duration::from_secs(15),
        |u, s| u.contains("/wait/shop") && s.contains("You are in line"),
    )
    .await;
    assert_eq!(b.text("#pos").await, "1");
    b.screenshot("2-visitor-b-waiting").await;

    // A leaves; B is told it is its turn, with a link on, and is moved on to the page it asked
    // for, query string and all, without a click.
    assert_eq!(a.post("/v1/rooms/shop/leave").await, json!(200));
    b.wait_until(
        "B is told it is its turn",
        Duration::from_secs(15),
        |u, s| {
            u.contains("/wait/shop") && s.contains("It is your turn!") && s.contains(">Continue<")
        },
    )
    .await;
    // The waiting figures go with the turn: no "place 1" or estimate under "It is your turn!".
    assert_eq!(
        b.run("return document.getElementById('details').hidden")
            .await,
        json!(true)
    );
    b.screenshot("3a-visitor-b-its-turn").await;
    b.wait_until(
        "B lands on the page it asked for",
        Duration::from_secs(15),
        |u, s| u == with_query && s.contains("Demo shop: you are in"),
    )
    .await;
    b.screenshot("3-visitor-b-admitted").await;

    // Visitor C without JavaScript: the page asks to join, with a button; then the meta
    // refresh moves them on once B leaves.
    let cjs = Browser::open(&driver, false, &dir.path().join("c")).await;
    cjs.go(&site_url).await;
    cjs.wait_until("C is asked to join", Duration::from_secs(15), |u, s| {
        u.contains("/wait/shop") && s.contains("Join the line")
    })
    .await;
    cjs.screenshot("4a-visitor-c-asked-to-join-without-javascript")
        .await;
    cjs.click("form button[type=submit]").await;
    cjs.wait_until(
        "C sees the waiting page",
        Duration::from_secs(15),
        |u, s| u.contains("/wait/shop") && s.contains("You are in line"),
    )
    .await;
    assert_eq!(cjs.text("#pos").await, "1");
    cjs.screenshot("4-visitor-c-waiting-without-javascript")
        .await;
    assert_eq!(b.post("/v1/rooms/shop/leave").await, json!(200));
    cjs.wait_until(
        "C lands on the application",
        Duration::from_secs(25),
        |u, s| u == site_url && s.contains("Demo shop: you are in"),
    )
    .await;
    cjs.screenshot("5-visitor-c-admitted-without-javascript")
        .await;

    // The dashboard: sign in, pause the room, see it paused.
    let d = Browser::open(&driver, true, &dir.path().join("d")).await;
    let admin = c.node(1).url("/admin");
    d.go(&admin).await;
    d.type_into("#token", TOKEN).await;
    d.click("button[type=submit]").await;
    d.wait_until("the dashboard", Duration::from_secs(10), |_, s| {
        s.contains("Rooms") && s.contains("/admin/rooms/shop")
    })
    .await;
    d.screenshot("6-dashboard").await;
    d.go(&c.node(1).url("/admin/rooms/shop")).await;
    d.click("input[value=pause] ~ button").await;
    d.wait_until("the room shows paused", Duration::from_secs(10), |_, s| {
        s.contains("Paused.") && s.contains(">Resume admissions<")
    })
    .await;
    d.screenshot("7-dashboard-room-paused").await;
    let (_, room) = c
        .admin(
            1,
            reqwest::Method::GET,
            "/v1/rooms/shop?consistent=true",
            None,
        )
        .await;
    assert_eq!(room["config"]["paused"], true);

    // The room asks a proof-of-work at the documented default difficulty. Visitor E's browser
    // solves it (Web Workers, WebCrypto's PBKDF2) and is let in; visitor F, without
    // JavaScript, is told why the button cannot work.
    let (s, v) = c
        .admin(
            1,
            reqwest::Method::PUT,
            "/v1/rooms/shop",
            Some(
                json!({"capacity": 10, "admit_per_minute": 600000, "session_ttl_secs": 600,
                "waiter_ttl_secs": 600, "entry": {"proof_of_work": {"work": 5500, "cost": 2000}}}),
            ),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let e = Browser::open(&driver, true, &dir.path().join("e")).await;
    let started = std::time::Instant::now();
    e.go(&site_url).await;
    e.screenshot("8-visitor-e-solving-the-challenge").await;
    e.wait_until(
        "E solves the challenge and lands on the application",
        Duration::from_secs(60),
        |u, s| u == site_url && s.contains("Demo shop: you are in"),
    )
    .await;
    // A person's wall time at the default difficulty (BENCHMARKS.md quotes it; not a target
    // checked here).
    let solved_ms = e
        .run("return sessionStorage.getItem('sluice-pow-ms-shop');")
        .await;
    println!(
        "proof-of-work: headless Chromium solved the challenge in {solved_ms} ms and reached the \
         application in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        solved_ms.is_string(),
        "the page timed its solution: {solved_ms}"
    );
    e.screenshot("9-visitor-e-admitted-after-the-challenge")
        .await;
    let f = Browser::open(&driver, false, &dir.path().join("f")).await;
    f.go(&site_url).await;
    f.wait_until("F is asked to join", Duration::from_secs(15), |u, s| {
        u.contains("/wait/shop") && s.contains("needs JavaScript")
    })
    .await;
    // The page does not tell a visitor to press a button the script hides while it works.
    assert!(!f.source().await.contains("Press the button"));
    f.click("form button[type=submit]").await;
    f.wait_until(
        "F is told why it cannot join",
        Duration::from_secs(15),
        |_, s| s.contains("needs JavaScript") && !s.contains("<form"),
    )
    .await;
    f.screenshot("10-visitor-f-without-javascript-cannot-solve")
        .await;
    let (_, room) = c
        .admin(
            1,
            reqwest::Method::GET,
            "/v1/rooms/shop?consistent=true",
            None,
        )
        .await;
    assert_eq!(room["totals"]["joined"], 4, "A, B, C and E; not F: {room}");
    for br in [a, b, cjs, d, e, f] {
        br.close().await;
    }
}

/// What the line shows, as a visitor's browser renders it: the waiting time as a range, the
/// number waiting only where the room shows it, and before a shuffled opening a marker that
/// places are drawn then (no place is shown).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_range_the_count_only_where_shown_and_the_provisional_marker() {
    if !prerequisites(
        "browser::the_page_shows_the_range_the_count_only_where_shown_and_the_provisional_marker",
        &[Need::Program("chromium"), Need::Program("chromedriver")],
    ) {
        return;
    }
    let c = Cluster::start(1).await;
    // One admission a minute: the third in line waits minutes, told as a range.
    let slow = |show_waiting: bool| {
        json!({"capacity": 100, "admit_per_minute": 1, "admit_burst": 1, "session_ttl_secs": 600,
               "waiter_ttl_secs": 600, "line": {"show_waiting": show_waiting}})
    };
    c.create_room("shown", slow(true)).await;
    c.create_room("hidden", slow(false)).await;
    let opens = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3_600;
    c.create_room(
        "draw",
        json!({"capacity": 100, "opens_at": opens, "shuffle_at_open": true, "waiter_ttl_secs": 600}),
    )
    .await;
    for room in ["shown", "hidden", "draw"] {
        for _ in 0..3 {
            c.join(1, room, None).await;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (_driver, driver) = start_driver().await;
    let b = Browser::open(&driver, true, &dir.path().join("b")).await;
    let base = format!("http://{}", c.node(1).http);

    b.go(&format!("{base}/wait/shown")).await;
    b.wait_until(
        "a place in the shown room",
        Duration::from_secs(15),
        |_, s| s.contains("id=\"pos\""),
    )
    .await;
    let eta = b.text("#eta").await;
    assert!(eta.contains('–') && eta.contains("min"), "a range: {eta:?}");
    assert_eq!(b.text("#waiting").await, "3", "the count is shown");
    b.screenshot("11-line-with-range-and-count").await;
    // "Last updated" is when the page last heard, and it says when it has heard nothing for a
    // while: its clock moved a minute on without a word from the node, it says so; the event
    // stream's next keep-alive (every 15 s, the status unchanged) moves "Last updated" and takes
    // the warning down.
    let stale_shown = |s: &str| s.contains("<p id=\"stale\" class=\"notice\" role=\"status\">");
    assert!(!stale_shown(&b.source().await), "heard just now");
    let updated = b.text("#updated").await;
    b.run("var real = Date.now; Date.now = function () { return real() + 60000; };")
        .await;
    b.wait_until(
        "the page to say it heard nothing",
        Duration::from_secs(10),
        |_, s| stale_shown(s),
    )
    .await;
    assert!(b.text("#stale").await.contains("No news"));
    b.screenshot("11b-line-heard-nothing").await;
    b.wait_until(
        "a keep-alive to move Last updated",
        Duration::from_secs(30),
        |_, s| !stale_shown(s),
    )
    .await;
    assert_ne!(b.text("#updated").await, updated, "Last updated moved");

    b.go(&format!("{base}/wait/hidden")).await;
    b.wait_until(
        "a place in the hidden room",
        Duration::from_secs(15),
        |_, s| s.contains("id=\"pos\""),
    )
    .await;
    assert!(b.find("#waiting").await.is_none(), "the count is hidden");
    assert!(!b.source().await.contains("People in line"));
    let (_, status) = c
        .admin(1, reqwest::Method::GET, "/v1/rooms/hidden", None)
        .await;
    assert_eq!(status["waiting"], 3, "the operator still sees it: {status}");
    b.screenshot("12-line-without-count").await;

    // A room that lets a network hold one place, held already from this address: the page's
    // own join is refused, and the page says why at once instead of offering "Join the line".
    let mut one = slow(true);
    one["entry"] = json!({"places_per_client_max": 1});
    c.create_room("one", one).await;
    c.join(1, "one", None).await;
    b.go(&format!("{base}/wait/one")).await;
    b.wait_until(
        "the reason the join was refused",
        Duration::from_secs(15),
        |_, s| s.contains("Your network holds as many places"),
    )
    .await;
    b.screenshot("12b-join-refused-for-the-network").await;

    b.go(&format!("{base}/wait/draw")).await;
    b.wait_until(
        "a place before the draw",
        Duration::from_secs(15),
        |_, s| s.contains("id=\"provisional\""),
    )
    .await;
    assert!(b.text("#provisional").await.contains("drawn by lot"));
    // The opening: how long in days and hours past a day, and its date in the visitor's zone
    // and language (the page without script says it in UTC).
    let opens = b.text("#opens").await;
    assert!(!opens.is_empty() && !opens.contains("UTC"), "{opens}");
    assert!(
        b.find("#pos").await.is_none(),
        "no place is shown before the draw"
    );
    b.screenshot("13-line-before-a-shuffled-opening").await;
    b.close().await;
}

/// The skip check itself (in `common`): a missing program is named with the package that
/// installs it, one that is installed is not, and the full tier fails instead of skipping.
#[test]
fn a_missing_prerequisite_is_named_and_the_full_tier_does_not_skip_it() {
    let needs = [
        Need::Program("sh"),
        Need::Program("sluice-no-such-program"),
        Need::PythonModule("sluice_no_such_module"),
    ];
    let what = missing("browser::example", &needs).expect("something is missing");
    assert_eq!(
        what,
        "browser::example: needs sluice-no-such-program, the Python module sluice_no_such_module \
         (apt-get install sluice-no-such-program; python3 -m pip install sluice_no_such_module)"
    );
    assert_eq!(missing("browser::example", &[Need::Program("sh")]), None);
    assert!(find_program("sh").is_some());
    let full = std::panic::catch_unwind(|| {
        check_prerequisites(
            "browser::example",
            &[Need::Program("sluice-no-such-program")],
            true,
        )
    });
    let message = full.expect_err("the full tier panics");
    let message = message.downcast_ref::<String>().expect("a message");
    assert!(
        message.contains("sluice-no-such-program") && message.contains("SLUICE_TEST_FULL=1"),
        "{message}"
    );
    assert!(check_prerequisites(
        "browser::example",
        &[Need::Program("sh")],
        true
    ));
}

/// The visitor's pages on a 390 px phone and the operator's control room, in a real browser:
/// axe-core finds no WCAG 2.1 AA violation on any of them, none scrolls sideways, and the flows
/// work as a person meets them: the language switch keeping the place, the operator's notice
/// arriving live, a mistyped room, a closed room's way onward, too many requests, blocked
/// cookies (told, not joined again and again), a place lost by being away too long (told);
/// signing in, charts full on first load, create refusing a name taken, revoke-all and delete
/// asking first, post-redirect-get, the configuration's error summary keeping the operator's
/// input, the branding preview, pools. Screenshots of each state go to `e2e-artifacts/`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_passes_axe_fits_a_phone_and_the_control_room_flows_work() {
    if !prerequisites(
        "browser::every_page_passes_axe_fits_a_phone_and_the_control_room_flows_work",
        &[
            Need::Program("chromium"),
            Need::Program("chromedriver"),
            Need::Axe,
        ],
    ) {
        return;
    }
    let axe = std::fs::read_to_string(axe_script().unwrap()).unwrap();
    let c = Cluster::start(1).await;
    let room = |capacity: u64, waiter_ttl: u64| {
        json!({"capacity": capacity, "admit_per_minute": 600, "session_ttl_secs": 600,
               "waiter_ttl_secs": waiter_ttl})
    };
    c.create_room("shop", room(1, 600)).await;
    c.create_room("brief", room(1, 2)).await;
    let mut closed = room(5, 600);
    closed["closes_at"] = json!(1);
    closed["line"] = json!({"after_url": "https://shop.example/sold-out"});
    c.create_room("over", closed).await;
    let mut drawn = room(1, 600);
    drawn["mode"] = json!("lottery");
    c.create_room("draw", drawn).await;
    // Someone holds each room's one place, so that browsers wait.
    let holder = c.join(1, "shop", None).await;
    c.join(1, "brief", None).await;
    c.join(1, "draw", None).await;
    let base = format!("http://{}", c.node(1).http);
    let (_driver, driver) = start_driver().await;
    let dir = tempfile::tempdir().unwrap();
    let phone = |javascript: bool| Opts {
        javascript,
        cookies_blocked: false,
        width: 390,
    };

    // A visitor on a phone joins and waits: the page, then the same place in German.
    let v = Browser::open_with(&driver, &dir.path().join("v"), phone(true)).await;
    v.go(&format!("{base}/wait/shop?next=/")).await;
    v.wait_until("a place", Duration::from_secs(15), |_, s| {
        s.contains("id=\"pos\"")
    })
    .await;
    v.wait_until(
        "the place shown by the script",
        Duration::from_secs(15),
        |_, s| s.contains("id=\"pos\">1<"),
    )
    .await;
    v.fits("waiting").await;
    v.axe(&axe, "waiting").await;
    v.screenshot("20-phone-waiting").await;
    v.click("a[hreflang=de]").await;
    v.wait_until("the page in German", Duration::from_secs(15), |_, s| {
        s.contains("<html lang=\"de\"") && s.contains("id=\"pos\">1<")
    })
    .await;
    v.axe(&axe, "waiting, in German").await;
    // The operator's notice arrives live, on the page already open.
    let (s, _) = c
        .admin(
            1,
            reqwest::Method::POST,
            "/v1/rooms/shop/notice",
            Some(json!({"text": "Doors open at 18:00. Thank you for waiting."})),
        )
        .await;
    assert!(s.is_success());
    v.wait_until("the notice", Duration::from_secs(15), |_, s| {
        s.contains("Doors open at 18:00")
    })
    .await;
    let shown = v
        .run("return !document.getElementById('notice').hidden")
        .await;
    assert_eq!(shown, json!(true));
    v.axe(&axe, "waiting with a notice").await;
    v.screenshot("21-phone-waiting-german-with-notice").await;

    // Pages for what goes wrong, each a page in the visitor's language with a way onward.
    for (path, name, words) in [
        (
            "/wait/shpo?lang=en&next=/",
            "not found",
            "no waiting room at this address",
        ),
        ("/wait/over?lang=en&next=/", "closed", "What happens next"),
        (
            "/wait/shop/bypass?lang=en",
            "staff entry",
            "type=\"password\"",
        ),
    ] {
        v.go(&format!("{base}{path}")).await;
        let src = v.source().await;
        assert!(src.contains(words), "{name}: {src}");
        v.fits(name).await;
        v.axe(&axe, name).await;
        v.screenshot(&format!("22-phone-{}", name.replace(' ', "-")))
            .await;
    }

    // Away too long: the page closed, the place lapses (once the node notices the page's event
    // stream is gone: up to two keep-alives), and back, the visitor is told so.
    let a = Browser::open_with(&driver, &dir.path().join("a"), phone(true)).await;
    a.go(&format!("{base}/wait/brief?next=/")).await;
    a.wait_until("a place in brief", Duration::from_secs(15), |_, s| {
        s.contains("id=\"pos\"")
    })
    .await;
    a.go("about:blank").await;
    wait_for("the place to lapse", Duration::from_secs(75), || async {
        let (_, r) = c
            .admin(1, reqwest::Method::GET, "/v1/rooms/brief", None)
            .await;
        r["totals"]["abandoned"].as_u64() >= Some(1)
    })
    .await;
    a.go(&format!("{base}/wait/brief?next=/")).await;
    let src = a.source().await;
    assert!(src.contains("away too long"), "{src}");
    assert!(
        !src.contains("data-manual=\"\""),
        "no join by itself: {src}"
    );
    a.axe(&axe, "away too long").await;
    a.screenshot("23-phone-away-too-long").await;
    a.close().await;

    // A room that draws by lot says what its draws are bound to, and what that means.
    let l = Browser::open_with(&driver, &dir.path().join("l"), phone(true)).await;
    l.go(&format!("{base}/wait/draw?next=/")).await;
    l.wait_until("the draw's commitment", Duration::from_secs(15), |_, s| {
        s.contains("<details id=\"draw\"")
    })
    .await;
    l.fits("waiting, drawn by lot").await;
    l.axe(&axe, "waiting, drawn by lot").await;
    l.close().await;

    // Cookies blocked: told so, and joined once at most, not once a second.
    let k = Browser::open_with(
        &driver,
        &dir.path().join("k"),
        Opts {
            cookies_blocked: true,
            ..phone(true)
        },
    )
    .await;
    let joined = || async {
        let (_, r) = c
            .admin(
                1,
                reqwest::Method::GET,
                "/v1/rooms/shop?consistent=true",
                None,
            )
            .await;
        r["totals"]["joined"].as_u64().unwrap()
    };
    let before = joined().await;
    k.go(&format!("{base}/wait/shop?next=/")).await;
    k.wait_until("the cookie warning", Duration::from_secs(15), |_, s| {
        s.contains("id=\"cookies\" role=\"alert\">")
    })
    .await;
    let warned = k
        .run("return !document.getElementById('cookies').hidden")
        .await;
    assert_eq!(warned, json!(true));
    assert!(joined().await <= before + 1, "no join loop");
    k.axe(&axe, "cookies blocked").await;
    k.screenshot("24-phone-cookies-blocked").await;
    k.close().await;

    // The operator, on a desktop and on a phone.
    let d = Browser::open_with(
        &driver,
        &dir.path().join("d"),
        Opts {
            javascript: true,
            cookies_blocked: false,
            width: 1280,
        },
    )
    .await;
    d.go(&format!("{base}/admin")).await;
    d.axe(&axe, "sign-in").await;
    d.type_into("#token", TOKEN).await;
    d.click("button[type=submit]").await;
    d.wait_until("the rooms", Duration::from_secs(10), |_, s| {
        s.contains("/admin/rooms/shop")
    })
    .await;
    d.axe(&axe, "rooms").await;
    d.screenshot("30-dashboard-rooms").await;
    // Create refuses a name taken, and leaves the room as it was.
    d.type_into("#newroom", "shop").await;
    d.click("form[action='/admin/rooms'] button").await;
    d.wait_until("the refusal", Duration::from_secs(10), |_, s| {
        s.contains("already exists") && s.contains("href=\"/admin/rooms/shop\"")
    })
    .await;
    d.axe(&axe, "create refused").await;
    let (_, r) = c
        .admin(1, reqwest::Method::GET, "/v1/rooms/shop", None)
        .await;
    assert_eq!(r["config"]["capacity"], 1);
    // The charts are full on first load: the node has kept two samples or more.
    wait_for("two samples", Duration::from_secs(40), || async {
        d.get_json("/admin/rooms/shop/history.json?span=15m").await["t"]
            .as_array()
            .is_some_and(|t| t.len() >= 2)
    })
    .await;
    d.go(&format!("{base}/admin/rooms/shop")).await;
    d.wait_until("five charts", Duration::from_secs(15), |_, s| {
        s.matches("class=\"uplot").count() >= 5
    })
    .await;
    let drawn = d
        .run("return Array.prototype.map.call(document.querySelectorAll('#chart-box [role=img]'), function (e) { return e.getAttribute('aria-label') })")
        .await;
    assert!(
        drawn[1]
            .as_str()
            .is_some_and(|l| l.starts_with("Waiting: Waiting now ") && !l.contains("unknown")),
        "{drawn}"
    );
    d.axe(&axe, "room").await;
    d.screenshot("31-dashboard-room-with-charts").await;
    // Ending every session asks first: without the box ticked, nothing is revoked.
    d.click("input[value=revoke] ~ button").await;
    d.wait_until("the question", Duration::from_secs(10), |_, s| {
        s.contains("End every session of the room instead")
            && s.contains("class=\"err\" role=\"alert\"")
    })
    .await;
    let (_, r) = c
        .admin(
            1,
            reqwest::Method::GET,
            "/v1/rooms/shop?consistent=true",
            None,
        )
        .await;
    assert_eq!(r["active"], 1, "nothing revoked: {r}");
    // Post, redirect, get: an action lands on the room's page, and reloading repeats nothing.
    // (Paused, with the holder's place ended, one admission waits for the operator.)
    c.admin(1, reqwest::Method::POST, "/v1/rooms/shop/pause", None)
        .await;
    let (s, _) = c
        .admin(
            1,
            reqwest::Method::POST,
            "/v1/rooms/shop/revoke",
            Some(json!({"visitor_id": holder["visitor_id"]})),
        )
        .await;
    assert!(s.is_success());
    d.go(&format!("{base}/admin/rooms/shop")).await;
    let (_, r) = c
        .admin(
            1,
            reqwest::Method::GET,
            "/v1/rooms/shop?consistent=true",
            None,
        )
        .await;
    let admitted = r["totals"]["admitted"].as_u64().unwrap();
    d.click("input[value=admit] ~ button").await;
    d.wait_until("the result", Duration::from_secs(10), |u, s| {
        u.ends_with("/admin/rooms/shop") && s.contains("Admitted 1.")
    })
    .await;
    d.go(&d.url().await).await;
    let (_, r) = c
        .admin(
            1,
            reqwest::Method::GET,
            "/v1/rooms/shop?consistent=true",
            None,
        )
        .await;
    assert_eq!(r["totals"]["admitted"].as_u64(), Some(admitted + 1), "{r}");
    assert!(!d.source().await.contains("Admitted 1."), "shown once");
    // A time is never broken between its date and its hour.
    assert_eq!(
        d.run("var t = document.querySelector('time'); return t && getComputedStyle(t).whiteSpace")
            .await,
        json!("nowrap")
    );
    // The long page's jump links each lead somewhere on it.
    assert_eq!(
        d.run("return Array.prototype.filter.call(document.querySelectorAll('nav.jump a'), function (a) { return !document.getElementById(a.getAttribute('href').slice(1)); }).map(function (a) { return a.getAttribute('href'); })")
            .await,
        json!([]),
        "every jump link has its part"
    );
    // The figure tiles follow the room without a reload: one more in line shows within seconds.
    let waiting = r["waiting"].as_u64().unwrap();
    c.join(1, "shop", None).await;
    let more = format!("id=\"t-waiting\">{}<", waiting + 1);
    d.wait_until(
        "the tile to count the newcomer",
        Duration::from_secs(15),
        |_, s| s.contains(&more),
    )
    .await;
    // Codes made on the page: one a line, links whole, the buttons there (they need the script).
    d.run("document.getElementById('f-ccount').value='2';")
        .await;
    d.click("input[value=codes_create] ~ button").await;
    d.wait_until("the new codes", Duration::from_secs(10), |_, s| {
        s.contains("id=\"made-codes\"")
    })
    .await;
    let links = d
        .run("return [document.getElementById('made-links').value, document.querySelector('#made-codes .js-only').hidden]")
        .await;
    let text = links[0].as_str().unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        text.lines()
            .all(|l| l.starts_with(&format!("{base}/wait/shop?code="))),
        "{text}"
    );
    assert_eq!(
        links[1],
        json!(false),
        "the copy and download buttons are shown"
    );
    d.axe(&axe, "codes made").await;
    d.screenshot("31b-dashboard-codes-made").await;
    d.go(&format!("{base}/admin/rooms/shop")).await;
    // A wrong configuration breaking three rules: every error at once in a summary at the top
    // of the page, which has the focus, the operator's input kept.
    d.run("document.getElementById('f-capacity').value='0';document.getElementById('f-session_ttl_secs').value='0';document.getElementById('f-branding.accent_color').value='#ffff00';document.getElementById('f-branding.title').value='Summer sale';document.getElementById('f-opens_at').value='';")
        .await;
    d.click("form[action$='/config'] button[type=submit]:not([formaction])")
        .await;
    d.wait_until("the summary", Duration::from_secs(10), |_, s| {
        s.contains("id=\"errors\"") && s.contains("href=\"#f-capacity\"")
    })
    .await;
    let src = d.source().await;
    for field in [
        "f-capacity",
        "f-session_ttl_secs",
        "f-branding.accent_color",
    ] {
        assert!(
            src.contains(&format!("href=\"#{field}\"")),
            "{field} in the summary"
        );
    }
    let (summary_at, config_at) = (
        src.find("id=\"errors\"").unwrap(),
        src.find("id=\"config\"").unwrap(),
    );
    assert!(summary_at < config_at, "the summary is at the top");
    assert_eq!(
        d.run("return document.activeElement.id").await,
        json!("errors"),
        "the summary has the focus"
    );
    let kept = d
        .run("return [document.getElementById('f-capacity').value, document.getElementById('f-branding.title').value]")
        .await;
    assert_eq!(kept, json!(["0", "Summer sale"]));
    d.axe(&axe, "configuration refused").await;
    d.screenshot("32-dashboard-config-summary").await;
    // The branding preview, with the form's unsaved colours (in this tab).
    d.go(&format!("{base}/admin/rooms/shop")).await;
    d.run("document.getElementById('f-branding.title').value='Summer sale';document.getElementById('f-branding.background_color').value='#fff4e0';document.querySelector('button[formaction$=preview]').removeAttribute('formtarget');")
        .await;
    d.click("button[formaction$=preview]").await;
    d.wait_until("the preview", Duration::from_secs(10), |_, s| {
        s.contains("Preview of the visitor")
            && s.contains("--bg:#fff4e0")
            && s.contains("class=\"brand-title\">Summer sale<")
    })
    .await;
    d.axe(&axe, "preview").await;
    d.screenshot("33-dashboard-branding-preview").await;
    let (_, r) = c
        .admin(1, reqwest::Method::GET, "/v1/rooms/shop", None)
        .await;
    assert!(
        r["config"]["branding"]["title"].is_null(),
        "nothing saved: {r}"
    );
    // The room's report, from its page's link.
    d.go(&format!("{base}/admin/rooms/shop")).await;
    d.click("a[href='/admin/rooms/shop/report']").await;
    d.wait_until("the report", Duration::from_secs(10), |u, s| {
        u.ends_with("/admin/rooms/shop/report") && s.contains("id=\"rt-arrivals\"")
    })
    .await;
    d.axe(&axe, "report").await;
    d.fits("report").await;
    d.screenshot("33b-dashboard-report").await;
    // Pools.
    d.go(&format!("{base}/admin/pools")).await;
    d.type_into("#p-name", "hall").await;
    d.type_into("#p-cap", "500").await;
    d.click("form.card button").await;
    d.wait_until("the pool", Duration::from_secs(10), |_, s| {
        s.contains("Pool hall saved")
    })
    .await;
    d.axe(&axe, "pools").await;
    d.screenshot("34-dashboard-pools").await;
    // Deleting a room asks for its name.
    d.go(&format!("{base}/admin/rooms/brief")).await;
    d.type_into("#a-del", "shop").await;
    d.click("input[value=delete] ~ button").await;
    d.wait_until("the refusal", Duration::from_secs(10), |_, s| {
        s.contains("type the room&#39;s name") || s.contains("type the room's name")
    })
    .await;
    assert!(
        !d.source().await.contains("to fix before saving"),
        "a wrong name is not a configuration error"
    );
    d.go(&format!("{base}/admin/rooms/brief")).await;
    d.type_into("#a-del", "brief").await;
    d.click("input[value=delete] ~ button").await;
    d.wait_until("back at the rooms", Duration::from_secs(10), |u, s| {
        u.ends_with("/admin") && s.contains("Room brief deleted")
    })
    .await;
    d.close().await;

    // The control room on a phone: nothing scrolls sideways.
    let p = Browser::open_with(&driver, &dir.path().join("p"), phone(true)).await;
    p.go(&format!("{base}/admin")).await;
    p.type_into("#token", TOKEN).await;
    p.click("button[type=submit]").await;
    p.wait_until("the rooms", Duration::from_secs(10), |_, s| {
        s.contains("/admin/rooms/shop")
    })
    .await;
    for path in ["/admin", "/admin/rooms/shop", "/admin/pools"] {
        p.go(&format!("{base}{path}")).await;
        p.fits(path).await;
    }
    p.screenshot("35-phone-dashboard-room").await;
    p.close().await;
    v.close().await;

    // Too many requests from one network: a page that says so (and retries by itself).
    let strict = Cluster::start_with(
        1,
        "[limits]\nvisitor_requests_per_second = 1\nvisitor_burst = 2\n",
    )
    .await;
    strict.create_room("shop", room(1, 600)).await;
    let t = Browser::open_with(&driver, &dir.path().join("t"), phone(false)).await;
    let url = format!("http://{}/wait/shop?lang=en&next=/", strict.node(1).http);
    let mut src = String::new();
    for _ in 0..6 {
        t.go(&url).await;
        src = t.source().await;
        if src.contains("Too many requests") {
            break;
        }
    }
    assert!(src.contains("Too many requests"), "{src}");
    t.screenshot("25-phone-too-many-requests").await;
    t.close().await;
    // Its markup checked in a browser that runs scripts (axe is one), without the refresh that
    // would reload it under the checker.
    let mut html = String::new();
    for _ in 0..10 {
        let page = reqwest::Client::new()
            .get(&url)
            .header("accept", "text/html")
            .send()
            .await
            .unwrap();
        if page.status() == reqwest::StatusCode::TOO_MANY_REQUESTS {
            html = page.text().await.unwrap();
            break;
        }
    }
    assert!(html.contains("Too many requests"), "{html}");
    let still = html
        .split("<meta http-equiv=\"refresh\"")
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part.to_string()
            } else {
                part.split_once('>')
                    .map_or("", |(_, rest)| rest)
                    .to_string()
            }
        })
        .collect::<String>();
    let j = Browser::open_with(&driver, &dir.path().join("j"), phone(true)).await;
    let encoded: String = still.bytes().map(|b| format!("%{b:02X}")).collect();
    j.go(&format!("data:text/html;charset=utf-8,{encoded}"))
        .await;
    j.axe(&axe, "too many requests").await;
    j.close().await;
}

/// Admission handed to another site: the application (the shipped Python example, on another
/// host than the waiting room's) sends a visitor to the waiting room; admitted, the visitor is
/// handed back with a single-use token and let in. When that session ends, the application sends
/// the visitor to the waiting room again, where it waits behind who came meanwhile, and is
/// handed back in once its turn comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_goes_from_the_waiting_room_to_another_site_and_back_when_the_session_ends() {
    let test = "browser::a_visitor_goes_from_the_waiting_room_to_another_site_and_back_when_the_session_ends";
    let mut needs = vec![Need::Program("chromium"), Need::Program("chromedriver")];
    needs.extend(HandoffApp::Python.needs());
    if !prerequisites(test, &needs) {
        return;
    }
    let c = Cluster::start(1).await;
    let port = free_port();
    let origin = format!("http://localhost:{port}");
    c.create_room(
        "shop",
        json!({"capacity": 1, "admit_per_minute": 600000, "session_ttl_secs": 10,
               "waiter_ttl_secs": 600, "line": {"handoff_origins": [origin]}}),
    )
    .await;
    let _app = HandoffApp::Python.start(port, &c.node(1).url(""), "shop", &origin);
    let http = reqwest::Client::new();
    wait_for("the application", Duration::from_secs(20), || {
        let (http, u) = (http.clone(), format!("http://127.0.0.1:{port}/"));
        async move { http.get(&u).send().await.is_ok() }
    })
    .await;
    let (_driver, driver) = start_driver().await;
    let dir = tempfile::tempdir().unwrap();
    let a = Browser::open(&driver, true, &dir.path().join("a")).await;
    let page = format!("{origin}/tickets?show=42");
    let waiting_room = c.node(1).url("/wait/shop");

    // To the waiting room and, the room being empty, straight back in with a token that the
    // application takes and removes from the address.
    a.go(&page).await;
    a.wait_until(
        "A is handed to the shop",
        Duration::from_secs(20),
        |u, s| u == page && s.contains("Welcome to the shop"),
    )
    .await;
    a.screenshot("handoff-1-in-the-shop").await;

    // B comes meanwhile and waits (capacity 1).
    let b = c.join(1, "shop", None).await;
    assert_eq!(b["state"], "waiting", "{b}");

    // A does nothing for the session's 10 s: the session ends, B is admitted in its place, and
    // the shop's own session (which ends with it) is over. A's next page in the shop goes to
    // the waiting room, where the page takes a new place, behind B.
    let b_ticket = b["ticket"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    while c.status(1, "shop", &b_ticket).await["state"] != "admitted" {
        assert!(
            std::time::Instant::now() < deadline,
            "A's session never ended"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    a.go(&page).await;
    a.wait_until("A waits its turn", Duration::from_secs(20), |u, s| {
        u.starts_with(&waiting_room) && s.contains("You are in line")
    })
    .await;
    assert_eq!(a.text("#pos").await, "1");
    a.screenshot("handoff-2-back-in-line").await;

    // B leaves: A's turn, and back to the page it asked for in the shop, with a new token.
    let (s, _) = c
        .visitor(
            1,
            reqwest::Method::POST,
            "/v1/rooms/shop/leave",
            Some(&b_ticket),
        )
        .await;
    assert_eq!(s, reqwest::StatusCode::OK);
    a.wait_until(
        "A is handed to the shop again",
        Duration::from_secs(20),
        |u, s| u == page && s.contains("Welcome to the shop"),
    )
    .await;
    a.screenshot("handoff-3-in-the-shop-again").await;
    a.close().await;
}

/// A brand's own page (`branding.template`): its header and footer around the page's parts, in
/// the visitor's language. The page joins, follows the line, shows a notice live and moves the
/// visitor on, as the built-in one does; its inline script is stopped by the page's policy;
/// axe-core passes it; the dashboard previews a template before it is saved, and says why one
/// would be refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brand_s_own_page_joins_follows_the_line_and_moves_on_and_is_previewed() {
    if !prerequisites(
        "browser::a_brand_s_own_page_joins_follows_the_line_and_moves_on_and_is_previewed",
        &[
            Need::Program("chromium"),
            Need::Program("chromedriver"),
            Need::Axe,
        ],
    ) {
        return;
    }
    let axe = std::fs::read_to_string(axe_script().unwrap()).unwrap();
    let template = r#"<style>.shop header{background:#14213d;color:#fff;padding:1rem;border-radius:.5rem}
.shop footer{margin-top:2rem;border-top:1px solid #ccc}</style>
<div class="shop"><header><strong>{{ title }}</strong></header>
{% if lang == "de" %}<p>Der Vorverkauf beginnt gleich.</p>{% else %}<p>The presale starts soon.</p>{% endif %}
<h1>{{ heading }}</h1>{{ notice }}{{ position }}{{ estimate }}{{ progress }}{{ join_form }}
<script>document.title = "inline script ran"</script>
<footer>{{ switcher }}</footer></div>"#;
    let c = Cluster::start(1).await;
    c.create_room(
        "brand",
        json!({"capacity": 1, "admit_per_minute": 600, "session_ttl_secs": 600,
               "waiter_ttl_secs": 600, "branding": {"title": "Night Market", "template": template}}),
    )
    .await;
    let holder = c.join(1, "brand", None).await;
    let base = format!("http://{}", c.node(1).http);
    let (_driver, driver) = start_driver().await;
    let dir = tempfile::tempdir().unwrap();
    let v = Browser::open(&driver, true, &dir.path().join("v")).await;

    // The brand's join page joins by itself; the brand's waiting page follows the line.
    v.go(&format!("{base}/wait/brand?next=/")).await;
    v.wait_until(
        "the brand's waiting page",
        Duration::from_secs(15),
        |_, s| s.contains("class=\"shop\"") && s.contains("id=\"pos\">1<"),
    )
    .await;
    assert!(v.text("header").await.contains("Night Market"));
    assert!(v.source().await.contains("The presale starts soon."));
    let title = v.run("return document.title").await;
    assert!(
        !title.as_str().unwrap().contains("inline script ran"),
        "the page's policy stops a template's inline script: {title}"
    );
    v.axe(&axe, "brand's waiting").await;
    v.screenshot("40-brand-template-waiting").await;
    // The notice arrives live on the brand's page.
    let (s, _) = c
        .admin(
            1,
            reqwest::Method::POST,
            "/v1/rooms/brand/notice",
            Some(json!({"text": "Doors open at 18:00."})),
        )
        .await;
    assert!(s.is_success());
    v.wait_until("the notice", Duration::from_secs(15), |_, s| {
        s.contains("Doors open at 18:00.")
    })
    .await;
    // In German, the brand's own German text.
    v.click("a[hreflang=de]").await;
    v.wait_until("the page in German", Duration::from_secs(15), |_, s| {
        s.contains("<html lang=\"de\"") && s.contains("Der Vorverkauf beginnt gleich.")
    })
    .await;
    v.screenshot("41-brand-template-german").await;
    // The holder leaves: the visitor's turn, said on the brand's page, and on to `next`.
    let (s, _) = c
        .visitor(
            1,
            reqwest::Method::POST,
            "/v1/rooms/brand/leave",
            holder["ticket"].as_str(),
        )
        .await;
    assert_eq!(s, reqwest::StatusCode::OK);
    v.wait_until("moved on", Duration::from_secs(20), |u, _| {
        !u.contains("/wait/brand")
    })
    .await;

    // The dashboard previews an unsaved template, and says why a broken one would be refused.
    let d = Browser::open(&driver, true, &dir.path().join("d")).await;
    d.go(&c.node(1).url("/admin")).await;
    d.type_into("#token", TOKEN).await;
    d.click("button[type=submit]").await;
    d.wait_until("the dashboard", Duration::from_secs(10), |_, s| {
        s.contains("/admin/rooms/brand")
    })
    .await;
    for (from, to, expect) in [
        (
            "starts soon",
            "starts in a minute",
            "The presale starts in a minute.",
        ),
        ("{{ estimate }}", "", "would be refused"),
    ] {
        d.go(&format!("{base}/admin/rooms/brand")).await;
        let set = format!(
            "var t=document.getElementById('f-branding.template');t.value=t.value.replace({},{});\
             document.querySelector('button[formaction$=preview]').removeAttribute('formtarget');",
            serde_json::to_string(from).unwrap(),
            serde_json::to_string(to).unwrap()
        );
        d.run(&set).await;
        d.click("button[formaction$=preview]").await;
        d.wait_until("the preview", Duration::from_secs(10), |_, s| {
            s.contains(expect) && s.contains("Preview")
        })
        .await;
        if to.is_empty() {
            break;
        }
        assert!(d.source().await.contains("class=\"shop\""));
        d.axe(&axe, "template preview").await;
        d.screenshot("42-dashboard-template-preview").await;
    }
    // The refused one: the banner names the missing part, and the built-in page is shown.
    let s = d.source().await;
    assert!(
        s.contains("estimate") && !s.contains("class=\"shop\""),
        "{s}"
    );
    d.screenshot("43-dashboard-template-refused-preview").await;
    let (_, r) = c
        .admin(1, reqwest::Method::GET, "/v1/rooms/brand", None)
        .await;
    assert_eq!(
        r["config"]["branding"]["template"], template,
        "nothing saved"
    );
    d.close().await;
    v.close().await;
}
