"""Built-in labelled demo datasets: alloy (EMT), polycrystal (Taylor factor), fem (heat conduction)."""
