// Package ui tests edgemq serve's status page in headless Chromium (chromedp): its test
// starts the built binary (EDGEMQ_BIN) on a temporary data dir, sends and consumes with the
// CLI, opens the page, waits for it to refresh, reads the numbers it shows and checks them
// against /api/status and "edgemq stats -server ... -json", and saves a screenshot. Run it
// with run.sh (make test-ui), which builds the binary and installs Chromium when missing.
package ui
