// memvm console: the little the pages need beyond htmx (no inline scripts: the CSP forbids them).

// A message box empties once its message was accepted.
document.addEventListener("htmx:afterRequest", function (event) {
  var form = event.detail.elt;
  if (form && form.id === "send" && event.detail.successful) {
    form.reset();
  }
});

// A block card being typed in is the operator's draft: it is never replaced behind their back.
document.addEventListener("input", function (event) {
  var card = event.target.closest && event.target.closest("article.block");
  if (card) {
    card.dataset.dirty = "true";
  }
});

// When a turn ends, the agent may have edited its blocks: reload every card nobody is editing (a
// draft keeps its version, and saving it over the agent's edit is a conflict the page shows).
document.addEventListener("turn-ended", function () {
  document.querySelectorAll("article.block[data-card-url]").forEach(function (card) {
    if (card.dataset.dirty !== "true") {
      htmx.ajax("GET", card.dataset.cardUrl, { target: card, swap: "outerHTML" });
    }
  });
});
