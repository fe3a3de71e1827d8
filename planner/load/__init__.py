"""Layer 2, loading: files in, checked, every error located (file:line or key path).

yaml         a safe YAML reader that keeps line numbers
catalog      the GPU, model, provider and offer tables (shipped or the user's)
scenario     a scenario file: parse, validate, resolve models, check names
quarter      a quarter file, and its calendar in steps
plan_file    a plan or schedule JSON read back for `planner simulate --plan`, checked for what the replays read
hf_config    models from Hugging Face `config.json` files
hf_architectures  each supported architecture's config keys and parameter count
hf_fetch     a model's `config.json` fetched from the Hugging Face Hub by id
offer_facts  facts the shipped offers know that outside sources lack
skypilot     `catalog import --from skypilot`
refresh      `catalog refresh`: what every provider shares (HTTP, API keys, shipped facts joined, the CSV written)
refresh_sources  which providers have a price API, from what, and `catalog refresh PROVIDER|all` run
refresh_azure  Azure's Retail Prices API read into offer rows
refresh_aws  AWS's EC2 price-list files and spot price history read into offer rows
refresh_gcp  Google Cloud's Cloud Billing Catalog SKUs read into offer rows
refresh_lambda  Lambda Cloud's instance types (prices, regions with capacity) read into offer rows
refresh_runpod  RunPod's GraphQL GPU types (prices, stock) read into offer rows
refresh_vast  Vast.ai's marketplace offers read into offer rows
refresh_do   DigitalOcean's droplet sizes read into offer rows
refresh_cudo  Cudo Compute's machine types read into offer rows
refresh_hyperbolic  Hyperbolic's catalog endpoint read into offer rows
refresh_fluidstack  Fluidstack's available configurations read into offer rows
examples     `planner examples`: copies of the shipped scenarios
team_config  a team's shared defaults in `planner.toml`
traces       spot availability traces (Can't Be Late's JSON format)
calibration  a fit from `planner calibrate` laid over the catalog
signals      availability signals (spot interruption buckets, placement scores, stock) laid over the offers
signals_fetch  `catalog signals`: AWS's Spot Instance Advisor and placement scores, Azure's eviction rates read
runs         run records: a CSV, or a folder of them
billing      what runs were billed, from a FOCUS or AWS CUR export
"""
