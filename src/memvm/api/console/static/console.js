// memvm console: the little the pages need beyond htmx (no inline scripts: the CSP forbids them).
// A message box empties once its message was accepted.
document.addEventListener("htmx:afterRequest", function (event) {
  var form = event.detail.elt;
  if (form && form.id === "send" && event.detail.successful) {
    form.reset();
  }
});
