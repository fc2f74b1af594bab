// The page's one script: while a step runs, ask for its state and redraw its bar; reload when it ends.
document.querySelectorAll("section.job[data-state='running']").forEach(function (section) {
  var key = section.dataset.job;
  function poll() {
    fetch("/jobs/" + encodeURIComponent(key), {credentials: "same-origin"})
      .then(function (response) { return response.json(); })
      .then(function (job) {
        if (!job) { return; }
        section.querySelector(".phase").textContent = job.phase;
        var bar = section.querySelector("progress");
        bar.value = job.percent;
        bar.textContent = job.percent + " %";
        var lines = section.querySelector(".lines");
        if (lines) { lines.textContent = job.lines.join("\n"); }
        if (job.state === "running") { setTimeout(poll, 500); } else { window.location.reload(); }
      })
      .catch(function () { setTimeout(poll, 2000); });
  }
  setTimeout(poll, 300);
});
