package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Refusal is a call the gateway answers itself, in the provider's error
// shape: Reason is fak's machine-readable reason (BUDGET_EXHAUSTED,
// NOT_FOUND, ...), Axis the exhausted budget axis.
type Refusal struct {
	Status  int
	Reason  string
	Axis    string
	Message string
}

func (r *Refusal) Error() string { return r.Reason + ": " + r.Message }

// Refusef returns a Refusal.
func Refusef(status int, reason, format string, args ...any) *Refusal {
	return &Refusal{Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// writeRefusal answers r in provider's error shape, so the provider's own
// client reports it the way it reports the provider's errors:
//
//	anthropic  {"type":"error","error":{"type":"rate_limit_error","message":…}}
//	openai     {"error":{"message":…,"type":"insufficient_quota","code":"BUDGET_EXHAUSTED"}}
//	gemini     {"error":{"code":429,"message":…,"status":"RESOURCE_EXHAUSTED","details":[…]}}
//
// Each also carries fak's reason and axis, where a client that knows fak
// finds them.
func writeRefusal(w http.ResponseWriter, provider string, r *Refusal) {
	msg := r.Reason + ": " + r.Message
	fak := map[string]string{"reason": r.Reason}
	if r.Axis != "" {
		fak["axis"] = r.Axis
	}
	var body any
	switch provider {
	case Anthropic:
		body = map[string]any{"type": "error", "error": map[string]any{"type": anthropicErrorType(r.Status), "message": msg}, "fak": fak}
	case Gemini:
		body = map[string]any{"error": map[string]any{"code": r.Status, "message": msg, "status": googleStatus(r.Status),
			"details": []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": r.Reason, "domain": "fak", "metadata": fak}}}}
	default:
		body = map[string]any{"error": map[string]any{"message": msg, "type": openAIErrorType(r.Status), "param": nil, "code": r.Reason}, "fak": fak}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.Status)
	_ = json.NewEncoder(w).Encode(body)
}

func anthropicErrorType(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusBadRequest:
		return "invalid_request_error"
	}
	return "api_error"
}

func openAIErrorType(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "insufficient_quota"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusBadRequest, http.StatusNotFound:
		return "invalid_request_error"
	}
	return "server_error"
}

func googleStatus(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	}
	return "UNAVAILABLE"
}
