// Fleetwatch placement for nginx's njs module (0.7.9, Debian's libnginx-mod-http-js), used by
// deploy/nginx/openai-router.conf (docs/placement.md, "From a gateway").
//
// route (js_content): the client's OpenAI body goes unchanged to the Proxy's POST /v1/placement (SPEC 16.4:
// it is a placement body as it stands); an accept or queue sends the request on to the first candidate
// (@fleetwatch_engine), anything else is answered here as the auth_request site answers it.
// scanUsage (js_body_filter): the engine's answer passes through untouched; the last
// "cached_tokens": N in it (a JSON body's usage, or a stream's final usage chunk) is kept for the report.
// feedback (js_set): the feedback body, built with JSON.stringify (an instance id may hold quotes).
//
// njs 0.7.9 allows no subrequest or fetch in a body filter or once the response is sent, so the report
// after the response is nginx's post_action (see the site); what it needs travels in js_var variables,
// which survive internal redirects while a VM (and its globals) does not.

var PLACEMENT = '/.fleetwatch/placement';
var ENGINE = '@fleetwatch_engine';

function refuse(r, status, error, retryAfter) {
    r.headersOut['Content-Type'] = 'application/json';
    if (retryAfter) {
        r.headersOut['Retry-After'] = retryAfter;
    }
    r.return(status, JSON.stringify({ok: false, error: error}) + '\n');
}

function firstCandidate(reply) {
    try {
        var answer = JSON.parse(reply.responseText);
        return answer.candidates && answer.candidates[0];
    } catch (e) {
        return null;
    }
}

function placed(r, reply) {
    // The Proxy's 429 and 503 are verdicts (shed, unavailable); its 400 refuses the body; anything else
    // (a 401 for the token, the Proxy down: nginx's own 502 or 504) means it could not be asked.
    if (reply.status === 429) {
        return refuse(r, 429, 'shed', reply.headersOut['Retry-After'] || '1');
    }
    if (reply.status === 503) {
        return refuse(r, 503, 'unavailable');
    }
    if (reply.status === 400) {
        return refuse(r, 400, 'validation_error');
    }
    var destinations = reply.headersOut['x-gateway-destination-endpoint'];
    var candidate = reply.status === 200 ? firstCandidate(reply) : null;
    if (!destinations || !candidate) {
        return refuse(r, 502, 'placement_failed');
    }
    r.variables.fleetwatch_destination = destinations.split(',')[0];
    r.variables.fleetwatch_instance = candidate.instance_id;
    var predicted = candidate.prefix_hit_tokens;
    if (Number.isInteger(predicted) && predicted >= 0) {
        r.variables.fleetwatch_predicted_cached_tokens = String(predicted);
    }
    r.internalRedirect(ENGINE);
}

function route(r) {
    if (r.method !== 'POST') {
        r.headersOut['Allow'] = 'POST';
        return refuse(r, 405, 'method_not_allowed');
    }
    // client_body_in_single_buffer and a buffer as large as the largest body keep it in memory; a body
    // written to a file would have no requestText.
    var body = r.requestText;
    if (body === undefined) {
        return refuse(r, 413, 'body_too_large');
    }
    r.subrequest(PLACEMENT, {method: 'POST', body: body}, function (reply) { placed(r, reply); });
}

// The body filter's VM lives for this request's answer. The last 64 characters of what passed are read again
// with the next chunk, so a "cached_tokens": N split across two chunks is read whole: its first digits may
// be taken for a moment, and the next chunk's match, the last one, takes their place.
var tail = '';
var CACHED_TOKENS = /"cached_tokens"\s*:\s*(\d+)/g;

function scanUsage(r, data, flags) {
    var text = tail + data.toString();
    var match, last = null;
    CACHED_TOKENS.lastIndex = 0;
    while ((match = CACHED_TOKENS.exec(text)) !== null) {
        last = match[1];
    }
    if (last !== null) {
        r.variables.fleetwatch_cached_tokens = last;
    }
    tail = text.slice(-64);
    r.sendBuffer(data, {last: flags.last, flush: true});  // flush: a stream's chunk leaves at once
}

var FAILED_STATUS = {refused: 502, timeout: 504};

function feedback(r) {
    var v = r.variables;
    // refused and timeout are set by the site's error locations, before nginx's own 502 or 504 is sent;
    // otherwise the engine answered, with $status.
    var outcome = v.fleetwatch_outcome;
    var status = outcome ? FAILED_STATUS[outcome] : parseInt(v.status, 10);
    var report = {
        instance_id: v.fleetwatch_instance,
        outcome: outcome || (status >= 500 ? 'error' : 'ok'),
        status_code: status >= 100 && status <= 599 ? status : null,
    };
    if (v.fleetwatch_cached_tokens) {
        report.cached_tokens = Number(v.fleetwatch_cached_tokens);
    }
    if (v.fleetwatch_predicted_cached_tokens) {
        report.predicted_cached_tokens = Number(v.fleetwatch_predicted_cached_tokens);
    }
    return JSON.stringify(report);
}

export default {route, scanUsage, feedback};
