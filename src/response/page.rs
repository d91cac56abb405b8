//! The default HTML pages: self-contained (inline CSS and JS, no external assets), small, made
//! from [`PageTemplate`]s so that users can replace them.

use serde_json::json;

use super::template::{Field, PageTemplate};
use super::{RenderContext, Texts};
use crate::outcome::Rejection;

/// The waiting page.
pub const WAITING_TEMPLATE: &str = r#"<!doctype html>
<html lang="{lang}" dir="{dir}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex,nofollow">
<noscript><meta http-equiv="refresh" content="{retry_after}"></noscript>
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<main id="twr" data-twr="{data}">
<p class="eyebrow">{eyebrow}</p>
<h1 id="twr-heading">{heading}</h1>
<section class="card" id="twr-card">
<p id="twr-position" class="position" role="status" aria-live="polite" aria-atomic="true"><span id="twr-position-before">{position_before}</span><strong id="twr-position-number">{position}</strong><span id="twr-position-after">{position_after}</span></p>
<dl class="facts">
<div class="wide"><dt>{eta_label}</dt><dd id="twr-eta">{eta}</dd></div>
<div><dt>{ahead_label}</dt><dd id="twr-ahead">{ahead}</dd></div>
<div><dt>{waiting_label}</dt><dd id="twr-waiting">{waiting}</dd></div>
</dl>
</section>
<p id="twr-note" class="note" aria-live="polite">{message}</p>
<form id="twr-leave" method="post" action="{leave_url}"><button type="submit">{leave_button}</button></form>
</main>
<script>{script}</script>
</body>
</html>
"#;

/// The full, unavailable, busy, limited and challenge pages: they try again (or solve the
/// challenge) by themselves.
pub const NOTICE_TEMPLATE: &str = r#"<!doctype html>
<html lang="{lang}" dir="{dir}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex,nofollow">
<noscript><meta http-equiv="refresh" content="{retry_after}"></noscript>
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<main id="twr" data-twr="{data}">
<p class="eyebrow">{eyebrow}</p>
<h1 id="twr-heading">{heading}</h1>
<p id="twr-note" class="note" role="status" aria-live="polite">{message}</p>
<p><a class="button" href="{return_to}">{link_text}</a></p>
</main>
<script>{script}</script>
</body>
</html>
"#;

/// The page after leaving the line (without JavaScript; with it, the waiting page says so
/// itself). It does not refresh.
pub const LEFT_TEMPLATE: &str = r#"<!doctype html>
<html lang="{lang}" dir="{dir}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex,nofollow">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<main id="twr">
<p class="eyebrow">{eyebrow}</p>
<h1 id="twr-heading">{heading}</h1>
<p class="note">{message}</p>
<p><a class="button" href="{return_to}">{link_text}</a></p>
</main>
</body>
</html>
"#;

/// The pages' CSS. Colours meet WCAG AA contrast (body text 15:1, secondary 7:1, the accent
/// 7:1 on white); dark mode follows the system.
pub const STYLE: &str = "\
:root{--bg:#eef1f5;--card:#fff;--fg:#14181f;--muted:#4b5563;--accent:#1d4ed8;--line:#d5dbe3}\
@media (prefers-color-scheme:dark){:root{--bg:#0f1318;--card:#1a2029;--fg:#eef1f5;\
--muted:#b4bdc9;--accent:#93b4ff;--line:#334155}}\
*{box-sizing:border-box}\
body{margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center;\
background:var(--bg);color:var(--fg);font:16px/1.5 system-ui,-apple-system,\"Segoe UI\",Roboto,sans-serif}\
main{width:100%;max-width:34rem;margin:1rem;padding:2rem 1.5rem;background:var(--card);\
border-radius:16px;box-shadow:0 4px 24px rgba(15,23,42,.08)}\
.eyebrow{margin:0;color:var(--muted);font-size:.8rem;font-weight:600;letter-spacing:.08em;\
text-transform:uppercase}\
h1{margin:.25rem 0 1.25rem;font-size:1.6rem;line-height:1.25}\
.card{border:1px solid var(--line);border-radius:12px;padding:1.25rem;text-align:center}\
.position{margin:0;font-size:1.05rem}\
.position strong{display:block;margin:.15rem 0;color:var(--accent);font-size:3.25rem;\
line-height:1.1;font-variant-numeric:tabular-nums}\
.facts{display:grid;grid-template-columns:1fr 1fr;gap:.75rem;margin:1.25rem 0 0}\
.facts div{background:var(--bg);border-radius:8px;padding:.6rem .5rem}.facts .wide{grid-column:1/-1}\
dt{color:var(--muted);font-size:.8rem}dd{margin:0;font-weight:600}\
.note{color:var(--muted);margin:1.25rem 0}\
button,.button{display:inline-block;font:inherit;padding:.6rem 1.1rem;border-radius:8px;\
border:1px solid var(--line);background:var(--card);color:var(--fg);cursor:pointer;\
text-decoration:none}\
button:hover,.button:hover{border-color:var(--muted)}\
button:focus-visible,.button:focus-visible{outline:3px solid var(--accent);outline-offset:2px}\
[hidden]{display:none!important}\
@media (max-width:480px){body{align-items:flex-start}main{margin:.75rem;padding:1.5rem 1.1rem}.position strong{font-size:2.75rem}}";

/// The pages' script: listens to the events endpoint when the room offers it and the browser
/// has `EventSource` (each event is the status endpoint's JSON; `event: end` or a refused
/// stream sends it back to polling, and a stream that ended within 30 s, or was replaced by a
/// newer stream of the session (another tab), is not opened again by that page), else polls the status endpoint (interval from the server's `retry_after`,
/// which grows with the position, ±20 % jitter), backs off exponentially up to 60 s on errors
/// and says so, goes to the page asked for when admitted, and leaves the line without a page
/// load. Several tabs share one place: the cookie is the place, not the tab. The challenge page
/// solves its proof of work with WebCrypto in one Web Worker per core (up to 8, worker `i`
/// trying nonces `i`, `i + n`, ...), or on the main thread where workers cannot start.
pub const SCRIPT: &str = r#"(function(){
var root=document.getElementById("twr");if(!root||!root.getAttribute("data-twr"))return;
var d=JSON.parse(root.getAttribute("data-twr")),t=d.texts,fails=0,done=false;
function el(id){return document.getElementById(id)}
function set(id,s){var e=el(id);if(e&&e.textContent!==s)e.textContent=s}
function num(n){var s=String(n);if(n>=d.from)s=s.replace(/\B(?=(\d{3})+(?!\d))/g,d.sep);
return d.digits==="0123456789"?s:s.replace(/\d/g,function(c){return d.digits.charAt(+c)})}
var pr=null;try{pr=new Intl.PluralRules(d.lang)}catch(x){}
function plural(s,n){if(!/^(zero|one|two|few|many|other):/.test(s))return s;var c=pr?pr.select(n):"other",o=s;
s.split("|").forEach(function(p){var i=p.indexOf(":"),k=p.slice(0,i);if(k===c)c=p.slice(i+1);if(k==="other")o=p.slice(i+1)});
return /^(zero|one|two|few|many|other)$/.test(c)?o:c}
function etaOf(j){if(j.eta_seconds==null)return j.estimating?t.eta_estimating:t.eta_unknown;
var lo=Math.max(1,Math.ceil(j.eta_low_seconds/60)),hi=Math.ceil(j.eta_high_seconds/60);
if(j.eta_seconds>=60&&hi<60&&hi>lo)return plural(t.eta_range,hi).replace("{low}",num(lo)).replace("{high}",num(hi));
return eta(j.eta_seconds)}
function eta(s){if(s==null)return t.eta_unknown;if(s<60)return t.eta_almost_there;
var m=Math.ceil(s/60);if(m<60)return plural(t.eta_minutes,m).replace("{minutes}",num(m));
var h=Math.floor(m/60);return plural(t.eta_hours,h).replace("{hours}",num(h)).replace("{minutes}",num(m%60))}
function later(f,s){setTimeout(f,s*1000*(0.8+Math.random()*0.4))}
function end(title,msg,link,href){done=true;set("twr-heading",title);document.title=title;
var c=el("twr-card");if(c)c.hidden=true;var f=el("twr-leave");if(f)f.hidden=true;
var n=el("twr-note");if(n){n.textContent=msg+" ";var a=document.createElement("a");
a.href=href;a.textContent=link;n.appendChild(a)}}
if(d.kind==="notice"){later(function(){location.replace(d.back)},d.retry);return}
if(d.kind==="scheduled"){countdown();return}
function countdown(){var end=Date.now()+d.opens_in,go=Date.now()+d.retry*1000+Math.random()*3000;
function two(n){return(n<10?"0":"")+n}
(function tick(){var now=Date.now();if(now>=go){location.replace(d.back);return}
var s=Math.max(0,Math.ceil((end-now)/1000)),h=Math.floor(s/3600),m=Math.floor(s%3600/60);
set("twr-heading",t.scheduled_countdown.replace("{time}",(h?h+":"+two(m):m)+":"+two(s%60)));
setTimeout(tick,Math.min(1000,Math.max(50,go-now)))})()}
if(d.kind==="challenge"){challenge(d.challenge,0);return}
function zeros(h){var n=0;for(var i=0;i<h.length;i++){var b=h[i];if(b===0){n+=8;continue}
while(!(b&128)){n++;b<<=1}break}return n}
function search(ch,bits,n,N,cb){var p=new TextEncoder().encode(ch+":"),L=p.length,m=new Uint8Array(L+20),c=0;m.set(p);
(function batch(){var ps=[];for(var i=0;i<256;i++){var s=String(n+i*N);for(var j=0;j<s.length;j++)m[L+j]=s.charCodeAt(j);
ps.push(crypto.subtle.digest("SHA-256",m.subarray(0,L+s.length)))}
Promise.all(ps).then(function(hs){for(var i=0;i<256;i++)if(zeros(new Uint8Array(hs[i]))>=bits)return cb(c+i+1,n+i*N);
c+=256;n+=256*N;cb(c);batch()})})()}
function solve(ch,bits,found){var t0=performance.now(),N=Math.min(navigator.hardwareConcurrency||1,8),ws=[],hs=[],u,over;
function stop(){ws.forEach(function(w){w.terminate()});ws=[];if(u)URL.revokeObjectURL(u);u=0}
function fin(n,c,k){if(over)return;over=true;stop();root.setAttribute("data-twr-workers",k);root.setAttribute("data-twr-hashes",c);
root.setAttribute("data-twr-ms",Math.round(performance.now()-t0));found(n)}
function alone(){stop();search(ch,bits,0,1,function(c,n){if(n>=0)fin(n,c,0)})}
try{u=URL.createObjectURL(new Blob(["var zeros="+zeros+",search="+search+
";onmessage=function(e){var a=e.data;search(a[0],a[1],a[2],a[3],function(c,n){postMessage([c,n])})}"],{type:"text/javascript"}));
for(var i=0;i<N;i++)(function(i){var w=new Worker(u);ws.push(w);hs[i]=0;
w.onmessage=function(e){hs[i]=e.data[0];if(e.data[1]>=0){for(var c=0,k=0;k<N;k++)c+=hs[k];fin(e.data[1],c,N)}};
w.onerror=function(){if(ws.length&&!over)alone()};w.postMessage([ch,bits,i,N])})(i)}catch(e){alone()}}
function challenge(ch,tries){if(!window.crypto||!crypto.subtle||!window.TextEncoder){set("twr-note",t.challenge_unsupported);return}
solve(ch,d.difficulty,function(nonce){var h={Accept:"application/json"};h[d.proof_header]=ch+":"+nonce;
fetch(d.proof,{method:"POST",credentials:"same-origin",cache:"no-store",headers:h})
.then(function(r){return r.json()}).then(function(j){
if(j.state==="proven"){location.replace(d.back);return}
if(j.state==="challenge"&&j.challenge&&tries<3){challenge(j.challenge,tries+1);return}
later(function(){location.replace(d.back)},j.retry_after||d.retry)})
.catch(function(){later(function(){location.replace(d.back)},d.retry)})})}
function fail(hint){fails++;var s=Math.min(60,Math.max(hint||0,d.retry*Math.pow(2,fails)));
set("twr-note",plural(t.error,Math.round(s)).replace("{seconds}",num(Math.round(s))));later(poll,s)}
function show(j){var p=plural(t.position,j.position).split("{position}");
if(p.length===2){set("twr-position-before",p[0]);set("twr-position-after",p[1])}set("twr-position-number",num(j.position));set("twr-ahead",num(j.ahead));set("twr-waiting",num(j.waiting));
set("twr-eta",j.paused?t.eta_paused:etaOf(j));set("twr-note",t.auto_update)}
var es=null,push=!!(d.events&&window.EventSource),opened=0;
function listen(){if(!push||es||done)return false;var got=false;opened=Date.now();
try{es=new EventSource(d.events)}catch(x){push=false;return false}
es.onmessage=function(e){var j;try{j=JSON.parse(e.data)}catch(x){return}got=true;fails=0;if(j.state==="waiting")show(j)};
es.addEventListener("end",function(e){if(/"replaced"/.test(e.data))push=false;quit();poll()});
es.onerror=function(){if(es&&es.readyState===2){quit();if(!got)push=false;later(poll,d.retry)}};
return true}
function quit(){if(es){es.close();es=null;if(Date.now()-opened<30000)push=false}}
function poll(){if(done)return;
fetch(d.status,{credentials:"same-origin",cache:"no-store",headers:{Accept:"application/json"}})
.then(function(r){return r.json()}).then(function(j){if(done)return;
if(j.state==="admitted"||j.state==="open"){done=true;set("twr-note",t.letting_in);location.replace(d.back);return}
if(j.state==="waiting"){fails=0;show(j);if(!listen())later(poll,j.retry_after||d.retry);return}
if(j.state==="unknown"||j.state==="left"){end(t.gone_title,t.gone_message,t.rejoin,d.back);return}
if(j.state==="closed"||j.state==="banned"){done=true;location.replace(d.back);return}
fail(j.retry_after)}).catch(function(){fail()})}
if(!listen())later(poll,d.retry);
var form=el("twr-leave");if(form)form.addEventListener("submit",function(e){e.preventDefault();quit();
fetch(d.leave,{method:"POST",credentials:"same-origin",headers:{Accept:"application/json"}})
.then(function(r){if(!r.ok)throw r;end(t.left_title,t.left_message,t.back_to_site,d.back)})
.catch(function(){form.submit()})});
})();"#;

/// Which of the pages.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum PageKind {
    Waiting,
    Notice,
    Challenge,
    Left,
    /// The countdown to a scheduled opening (the notice template): it goes to the page asked
    /// for at the opening, a few random seconds after (the registrants' order is fixed by their
    /// draws, so nobody gains by being first; the jitter spreads the load).
    Scheduled,
}

impl PageKind {
    fn name(self) -> &'static str {
        match self {
            PageKind::Waiting => "waiting",
            PageKind::Notice => "notice",
            PageKind::Challenge => "challenge",
            PageKind::Left => "left",
            PageKind::Scheduled => "scheduled",
        }
    }
}

/// Renders `template` for `rejection` (`None`: the page after leaving). Long but flat: one arm
/// per template field.
pub(super) fn render(
    template: &PageTemplate,
    texts: &Texts,
    rejection: Option<&Rejection>,
    cx: &RenderContext<'_>,
) -> String {
    let kind = match rejection {
        Some(Rejection::Waiting { .. }) => PageKind::Waiting,
        Some(Rejection::Challenge { .. }) => PageKind::Challenge,
        Some(Rejection::Scheduled { .. }) => PageKind::Scheduled,
        Some(_) => PageKind::Notice,
        None => PageKind::Left,
    };
    let (heading, message) = heading_and_message(texts, rejection);
    let retry = rejection.map_or(0, |r| r.retry_after().as_secs().max(1));
    let (position, waiting) = (
        rejection.and_then(Rejection::position),
        rejection.and_then(Rejection::waiting),
    );
    let number = |n: Option<u64>| n.map(|n| texts.number(n)).unwrap_or_default();
    let (before, after) = texts.position_parts(position.unwrap_or(0));
    let eta = rejection.map(|r| r.eta());
    template.render(|field| match field {
        Field::Lang => texts.lang.clone(),
        Field::Dir => texts.dir.clone(),
        Field::Title | Field::Heading => heading.clone(),
        Field::Eyebrow => texts.eyebrow.clone(),
        Field::Message => message.clone(),
        Field::Room => cx.room.to_owned(),
        Field::State => rejection.map_or("left", Rejection::state).to_owned(),
        Field::Position => number(position),
        Field::PositionText => position
            .map(|p| {
                texts
                    .form(&texts.position, p)
                    .replace("{position}", &texts.number(p))
            })
            .unwrap_or_default(),
        Field::PositionBefore => position.map(|_| before.to_owned()).unwrap_or_default(),
        Field::PositionAfter => position.map(|_| after.to_owned()).unwrap_or_default(),
        Field::Ahead => number(rejection.and_then(Rejection::ahead)),
        Field::AheadLabel => texts.ahead_label.clone(),
        Field::WaitingLabel => texts.waiting_label.clone(),
        Field::Waiting => number(waiting),
        Field::Eta => match (kind, eta) {
            (PageKind::Waiting, _) if rejection.is_some_and(Rejection::paused) => {
                texts.eta_paused.clone()
            }
            (PageKind::Waiting, Some(eta)) => {
                let r = rejection.expect("a waiting page has its rejection");
                texts.eta_of(eta, r.eta_range(), r.estimating())
            }
            _ => String::new(),
        },
        Field::EtaLabel => texts.eta_label.clone(),
        Field::EtaSeconds => eta
            .flatten()
            .map(|d| d.as_secs().to_string())
            .unwrap_or_default(),
        Field::RetryAfter => retry.to_string(),
        Field::StatusUrl => cx.status_path.to_owned(),
        Field::LeaveUrl => cx.leave_path.to_owned(),
        Field::ReturnTo => cx.return_to.to_owned(),
        Field::LeaveButton => texts.leave_button.clone(),
        Field::LinkText => match kind {
            PageKind::Left => texts.back_to_site.clone(),
            _ => texts.try_again.clone(),
        },
        Field::Data => page_data(kind, rejection, texts, cx, retry),
        Field::Style => STYLE.to_owned(),
        Field::Script => SCRIPT.to_owned(),
    })
}

/// The page's title and message for `rejection` (`None`: the page after leaving).
fn heading_and_message<'t>(
    texts: &'t Texts,
    rejection: Option<&Rejection>,
) -> (&'t String, &'t String) {
    match rejection {
        Some(Rejection::Waiting { .. }) => (&texts.waiting_title, &texts.auto_update),
        Some(Rejection::Full { .. }) => (&texts.full_title, &texts.full_message),
        Some(Rejection::Closed { .. }) => (&texts.closed_title, &texts.closed_message),
        Some(Rejection::Banned { .. }) => (&texts.banned_title, &texts.banned_message),
        Some(Rejection::Refused { .. }) => (&texts.refused_title, &texts.refused_message),
        Some(Rejection::Unavailable { .. }) => {
            (&texts.unavailable_title, &texts.unavailable_message)
        }
        Some(Rejection::Busy { .. }) => (&texts.busy_title, &texts.busy_message),
        Some(Rejection::Limited { .. }) => (&texts.limited_title, &texts.limited_message),
        Some(Rejection::Challenge { .. }) => (&texts.challenge_title, &texts.challenge_message),
        Some(Rejection::Scheduled { .. }) => (&texts.scheduled_title, &texts.scheduled_message),
        None => (&texts.left_title, &texts.left_message),
    }
}

/// The JSON the page's script reads from `data-twr`: where to poll, what to say, when.
fn page_data(
    kind: PageKind,
    rejection: Option<&Rejection>,
    texts: &Texts,
    cx: &RenderContext<'_>,
    retry: u64,
) -> String {
    json!({
        "kind": kind.name(),
        "status": cx.status_path,
        "events": cx.events_path,
        "leave": cx.leave_path,
        "back": cx.return_to,
        "retry": retry,
        "challenge": cx.challenge,
        "difficulty": rejection.and_then(Rejection::difficulty),
        "proof": cx.proof_path,
        "proof_header": crate::defences::proof_of_work::PROOF_HEADER,
        // The countdown runs on the room's clock: the time left, not a time of day, so a
        // browser's wrong clock does not move it.
        "opens_in": match rejection {
            Some(Rejection::Scheduled { opens_in, .. }) => {
                Some(u64::try_from(opens_in.as_millis()).unwrap_or(u64::MAX))
            }
            _ => None,
        },
        "lang": texts.lang,
        "sep": texts.thousands_separator,
        "from": texts.grouping_from,
        "digits": texts.digits,
        "texts": {
            "position": texts.position,
            "eta_almost_there": texts.eta_almost_there,
            "eta_minutes": texts.eta_minutes,
            "eta_hours": texts.eta_hours,
            "eta_unknown": texts.eta_unknown,
            "eta_paused": texts.eta_paused,
            "eta_estimating": texts.eta_estimating,
            "eta_range": texts.eta_range,
            "auto_update": texts.auto_update,
            "error": texts.error,
            "letting_in": texts.letting_in,
            "left_title": texts.left_title,
            "left_message": texts.left_message,
            "back_to_site": texts.back_to_site,
            "gone_title": texts.gone_title,
            "gone_message": texts.gone_message,
            "rejoin": texts.rejoin,
            "challenge_unsupported": texts.challenge_unsupported,
            "scheduled_countdown": texts.scheduled_countdown,
        },
    })
    .to_string()
}
