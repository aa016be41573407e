// The module path is deliberately not a download location (.invalid is reserved, RFC 2606):
// this client is used from a checkout of the jobq repository; README.md says how.
module jobq.invalid/jobq

go 1.19
